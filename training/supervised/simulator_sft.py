"""Fine-tuning a search simulator (ZeroSearch's recipe): a model learns to write, for a query,
a useful document (one that holds what the query was made for) or a noisy one on demand,
from a real engine's labelled results (`envs/search/simulator_data.py`), in the very chat the
simulated engine serves it with (`tools/search/engines/simulated.py:prompt`)."""

from __future__ import annotations

from collections.abc import Sequence

from toolgym.agents.demonstrations import Demonstration
from toolgym.agents.render import ChatRenderer
from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.search.simulator_data import Result
from toolgym.tools.search.engines.simulated import prompt


def examples(
    results: Sequence[Result], split: str = "train", noisy_per_query: int = 1
) -> list[tuple[str, str, str]]:
    """(kind, query, document text) to imitate, each once. Per query, every useful result and
    its `noisy_per_query` best-ranked noisy ones (the most plausible): a real engine returns
    mostly noise, and a simulator that learns that proportion writes noise when asked for use."""
    seen: dict[tuple[str, str, str], None] = {}
    noisy: dict[str, int] = {}
    for r in sorted(results, key=lambda r: r.rank):
        if r.split != split:
            continue
        if not r.useful:
            if noisy.get(r.query, 0) >= noisy_per_query:
                continue
            noisy[r.query] = noisy.get(r.query, 0) + 1
        seen[("useful" if r.useful else "noisy", r.query, r.document.contents)] = None
    return list(seen)


def demonstration(renderer: ChatRenderer, kind: str, query: str, text: str) -> Demonstration:
    """One written document as a one-step trajectory: the loss falls on the document and the
    turn's closing tokens, so the model learns to stop."""
    prompt_ids = renderer.prompt_ids(prompt(kind, query))
    response = renderer.encode_plain(text) + renderer.closing_ids()
    ids = prompt_ids + response
    step = Step(len(prompt_ids), len(ids), [0.0] * len(response), text, [], 1.0, kind, kind)
    trajectory = Trajectory(id=f"simulator:{kind}:{query}", token_ids=ids,
                            prompt_length=len(prompt_ids), steps=[step], role="simulator")  # fmt: skip
    return Demonstration(trajectory, [True])


def demonstrations(renderer: ChatRenderer, results: Sequence[Result], split: str = "train",
                   max_tokens: int | None = None, noisy_per_query: int = 1) -> list[Demonstration]:  # fmt: skip
    """The split's examples, each document cut to `max_tokens` tokens if given (the length the
    server will write)."""
    out = []
    for kind, query, text in examples(results, split, noisy_per_query):
        if max_tokens is not None:
            ids = renderer.encode_plain(text)
            if len(ids) > max_tokens:
                text = renderer.tokenizer.decode(ids[:max_tokens])
        out.append(demonstration(renderer, kind, query, text))
    return out
