"""How good a search simulator is, ZeroSearch's way: for held-out queries, how often the
documents it writes as useful hold what the query was made for, how often its noisy ones do
(they should not), next to how often the real engine's own results do."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from toolgym.envs.search.simulator_data import Result, holds
from toolgym.tools.search.engines.base import Controls
from toolgym.tools.search.engines.simulated import SimulatedEngine, Writer


@dataclass(frozen=True)
class Quality:
    queries: int
    useful: float
    """Share of documents written as useful that hold the gold."""
    noisy: float
    """Share of documents written as noisy that hold the gold (lower is better)."""
    real_top1: float
    """Share of queries whose real first result holds the gold."""
    real_any: float
    """Share of queries with the gold in any real result kept."""

    def to_json(self) -> dict[str, float | int]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def quality(writer: Writer, results: Sequence[Result], split: str = "eval", samples: int = 4,
            max_tokens: int = 96, temperature: float = 1.0) -> Quality:  # fmt: skip
    """`samples` useful and `samples` noisy documents per (query, gold) of `split`, each with
    its own seed."""
    pairs: dict[tuple[str, tuple[str, ...]], list[Result]] = {}
    for r in results:
        if r.split == split:
            pairs.setdefault((r.query, tuple(r.gold)), []).append(r)
    if not pairs:
        raise ValueError(f"no {split} queries to measure on")
    engine = SimulatedEngine(writer, max_tokens=max_tokens, temperature=temperature, cache_size=0)
    keys = list(pairs)

    async def written(noise: float) -> list[list[str]]:
        rows = await engine.search_with(
            [q for q, _ in keys for _ in range(samples)], 1,
            [Controls(noise=noise, seed=i) for _ in keys for i in range(samples)],
        )  # fmt: skip
        texts = [row[0].document.contents for row in rows]
        return [texts[i * samples : (i + 1) * samples] for i in range(len(keys))]

    async def both() -> list[list[list[str]]]:  # one batch: the writer serves them together
        return list(await asyncio.gather(written(0.0), written(1.0)))

    useful, noisy = asyncio.run(both())

    def share(texts: list[list[str]]) -> float:
        hits = sum(holds(t, gold) for (_, gold), row in zip(keys, texts, strict=True) for t in row)
        return hits / (len(keys) * samples)

    top1 = sum(any(r.useful and r.rank == 0 for r in pairs[k]) for k in keys) / len(keys)
    any_ = sum(any(r.useful for r in pairs[k]) for k in keys) / len(keys)
    return Quality(len(keys), share(useful), share(noisy), top1, any_)
