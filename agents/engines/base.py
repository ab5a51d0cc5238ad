"""The engine protocol: token ids in, token ids and their log-probabilities out.

Engines never see text conversations: the rollout owns the token sequence (see
agents/render.py) and asks for a completion of exactly those ids, so what the trainer scores
is what was sampled. Log-probabilities are those of the model's own distribution (log-softmax
of the raw logits, before temperature or top-p), which is what PPO's importance ratio needs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from toolgym.errors import ToolgymError

if TYPE_CHECKING:
    from toolgym.agents.models.device import Precision
    from toolgym.agents.vision import ImageEncoder


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


def request_problem(
    prompt_ids: list[int], sampling: SamplingParams, vocab_size: int, max_length: int
) -> str | None:
    """What makes a request one no engine can serve (None: nothing), in words for its
    caller: an engine raises it before the model sees the request."""
    if not prompt_ids:
        return "the prompt is empty"
    if any(not isinstance(t, int) or not 0 <= t < vocab_size for t in prompt_ids):
        return f"prompt token ids must be integers in [0, {vocab_size})"
    if sampling.max_tokens < 1:
        return f"max_tokens must be at least 1, got {sampling.max_tokens}"
    if len(prompt_ids) + sampling.max_tokens > max_length:
        return (
            f"prompt ({len(prompt_ids)} tokens) + max_tokens ({sampling.max_tokens}) exceeds "
            f"the model's context of {max_length} tokens"
        )
    if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
        return "temperature must be >= 0 and top_p in (0, 1]"
    return None


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" (end of turn or stop string) or "length" (max_tokens)
    top_logprobs: list[dict[int, float]] | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the engine took from its prefix cache instead of computing them."""


@runtime_checkable
class Engine(Protocol):
    """Anything that can complete token ids: what a rollout needs; the engine a trainer
    generates with is a `PolicyEngine`. Its class declares what else it can do
    (`capabilities`), read, never probed for. It keeps no version: the trainer's policy gate
    is the one clock (agents/policy_gate.py)."""

    capabilities: ClassVar[Capabilities]

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        """An engine that serves vision-language models also takes `images=`: the data URLs
        of the images whose placeholder tokens are in `prompt_ids`, in order (rollouts pass
        it only when there are images)."""
        ...

    async def aclose(self) -> None: ...


WeightSync = Literal["shared", "full", "lora"]
"""How an engine takes a trainer's new weights:
    shared  it holds the trained model itself (nothing to send)
    full    `update_weights(state_dict)` (TakesFullWeights: vLLM in-process)
    lora    adapters it loads by path and requests name (ServesAdapters: servers)"""


@dataclass(frozen=True)
class Capabilities:
    """What an engine class can do, declared beside its code and read by the trainer's
    builders: a capability is never found by probing for a method."""

    weight_sync: WeightSync
    """The way a trainer hands it new weights."""
    full_weights: bool = False
    """It takes a full state dict (TakesFullWeights)."""
    adapters: bool = False
    """It serves named LoRA adapters (ServesAdapters); a LoRA run then sends adapters, which
    are small, rather than full weights."""
    images: bool = False
    """It generates from images (vision-language models, `generate(..., images=)`) with the
    encoder it holds as `images` (ReadsImages)."""
    tokenizer: bool = False
    """It loads the model in this process and holds its tokenizer as `tokenizer`
    (HoldsTokenizer): the one to render prompts with. An engine behind a server has none."""
    episode_context: bool = False
    """It keeps an episode's context between turns (KeepsEpisodeContext): the rollout passes
    `episode=` to generate and ends the episode when it is over."""
    requires: tuple[str, ...] = ()
    """The trainer settings (`engine.*`) it cannot do without."""
    needs: tuple[str, ...] = ()
    """What the machine must have for it (`toolgym doctor`'s checks: "vllm", "cuda")."""


@runtime_checkable
class TakesFullWeights(Protocol):
    async def update_weights(self, state_dict: dict[str, Any]) -> None:
        """Load the trained weights."""
        ...


@runtime_checkable
class ServesAdapters(Protocol):
    async def load_adapter(self, name: str, path: str) -> None: ...

    async def unload_adapter(self, name: str) -> None: ...


@dataclass(frozen=True)
class PolicyContext:
    """What a trainer holds for the engine it generates with: each engine's `for_policy`
    takes what it needs and names in `Capabilities.requires` the settings it cannot do
    without."""

    model_path: str
    """The policy's model directory."""
    model: Any = None
    """The loaded model being trained (an engine in this process may generate with it)."""
    tokenizer: Any = None
    seed: int = 0
    precision: Precision | None = None
    images: ImageEncoder | None = None
    """The policy's image encoder, for an engine that reads images."""
    base_url: str | None = None
    served_model: str | None = None
    own_weights: bool = False
    """Keep weights of its own: it generates while the trainer updates (async) or the trained
    ones are sharded (distributed)."""


class PolicyEngine(Engine, Protocol):
    """The engine a trainer generates with: its class declares its `capabilities` and builds
    it with `for_policy(context)` from the trainer's PolicyContext."""


class HoldsTokenizer(Protocol):
    """An engine that loads the model itself, in this process: its tokenizer is the one to
    render prompts with (an engine behind a server has none here)."""

    tokenizer: Any


class ReadsImages(Protocol):
    """An engine that generates from images: its encoder prepares them (None when the model
    it loaded is text-only)."""

    images: Any


class KeepsEpisodeContext(Protocol):
    """An engine that keeps an episode's context (its KV cache) between the episode's turns:
    its `generate` also takes `episode=`, a key unique to the episode, and a turn whose prompt
    extends that episode's last one prefills only the tokens it adds. The episode's runner
    calls `end_episode` when it is over, which frees the context. (A wrapper that forwards
    an engine's attributes, `end_episode` among them, forwards generate's keywords too.)"""

    def end_episode(self, episode: Hashable) -> None: ...
