"""The engine protocol: token ids in, token ids and their log-probabilities out.

Engines never see text conversations: the rollout owns the token sequence (see
agents/render.py) and asks for a completion of exactly those ids, so what the trainer scores
is what was sampled. Log-probabilities are those of the model's own distribution (log-softmax
of the raw logits, before temperature or top-p), which is what PPO's importance ratio needs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from toolgym.errors import ToolgymError


class EngineError(ToolgymError, RuntimeError):
    """A generation request failed for reasons outside the model (server down, bad reply)."""


@dataclass
class SamplingParams:
    """How to sample one completion."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    """Stop strings: generation ends once the text contains one (its tokens are kept)."""
    stop_token_ids: list[int] = field(default_factory=list)
    """Extra token ids that end generation, besides the model's end-of-turn tokens."""
    seed: int | None = None
    top_logprobs: int = 0
    """Also return the k most likely tokens at each position (0: only the sampled one)."""


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" (end of turn or stop string) or "length" (max_tokens)
    top_logprobs: list[dict[int, float]] | None = None
    prompt_tokens: int = 0


@runtime_checkable
class Engine(Protocol):
    """Anything that can complete token ids; `policy_version` counts weight updates.

    Weight sync is part of the protocol: an engine a trainer generates with says how it
    takes new weights in `weight_sync` (a class attribute) and has the matching methods:
        shared  it holds the trained model itself (nothing to send)
        full    `async update_weights(state_dict)` (vLLM in-process)
        lora    `async load_adapter(name, path)` and `async unload_adapter(name)` (servers)
    and a classmethod `for_policy(**context)` that builds it for a trainer (context: model,
    tokenizer, model_path, base_url, served_model, seed, precision, images; each takes what it needs;
    a class attribute `requires` names the ones it cannot do without).
    """

    policy_version: int

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        """An engine that serves vision-language models also takes `images=`: the data URLs
        of the images whose placeholder tokens are in `prompt_ids`, in order (rollouts pass
        it only when there are images)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class KeepsEpisodeContext(Protocol):
    """An engine that keeps an episode's context (its KV cache) between the episode's turns:
    its `generate` also takes `episode=`, a key unique to the episode, and a turn whose prompt
    extends that episode's last one prefills only the tokens it adds. The episode's runner
    calls `end_episode` when it is over, which frees the context. (A wrapper that forwards
    an engine's attributes, `end_episode` among them, forwards generate's keywords too.)"""

    def end_episode(self, episode: Hashable) -> None: ...
