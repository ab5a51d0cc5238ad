"""Which search engine a search env talks to: a ready instance, a `/retrieve` server, an index
directory loaded in-process, a model that writes the results (simulated), or (the default) a
bm25 index over the built-in synthetic world.

The arguments are checked when the env is built; the engine itself is made on the first
reset, as a shared resource (envs/resources.py): every instance with the same arguments
shares one engine (one index in memory, one simulator model loaded per process), and it is
closed with its owner, not with an env instance. A ready instance passed as `engine` belongs
to the caller, who closes it.

The simulator's model reaches the engine through the "writer" provider (model directory ->
writer), supplied by the runtime: envs do not import the generation engines above them.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.envs.resources import WRITER, Resources
from toolgym.envs.search.world import World
from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import write_corpus
from toolgym.tools.search.engines.base import Hit, SearchEngine


@dataclass(frozen=True)
class EngineChoice:
    """The one engine an env's arguments name, checked at once and made on demand."""

    kind: str
    """engine, server_url, index, simulator or world."""
    value: Any
    noise: tuple[float, float, float] = (0.0, 0.5, 4.0)

    @property
    def key(self) -> Hashable:
        """What makes two envs' engines the same shared resource."""
        value = self.value if self.kind == "world" else str(self.value)
        return ("search-engine", self.kind, value, self.noise if self.kind == "simulator" else None)

    async def open(self, resources: Resources) -> SearchEngine:
        if self.kind == "simulator":
            from toolgym.tools.search.engines.simulated import NoiseSchedule, SimulatedEngine

            writer = await resources.get(
                ("writer", str(self.value)), lambda: resources.provider(WRITER)(str(self.value))
            )
            return SimulatedEngine(writer, NoiseSchedule(*self.noise))
        if self.kind == "server_url":
            from toolgym.tools.search.client import RemoteEngine

            return RemoteEngine(self.value)
        if self.kind == "index":
            from toolgym.tools.search.index import load_engine

            return await asyncio.to_thread(load_engine, str(self.value))
        return await asyncio.to_thread(WorldEngine, *self.value)


def choose_engine(
    server_url: str | None,
    index: str | Path | None,
    world_seed: int,
    world_size: str,
    simulator: str | Path | None = None,
    noise: tuple[float, float, float] = (0.0, 0.5, 4.0),
    engine: SearchEngine | None = None,
) -> EngineChoice:
    """Which engine the arguments name (at most one of them; none: the world's bm25)."""
    named = {"engine": engine, "server_url": server_url, "index": index, "simulator": simulator}
    given = [name for name, value in named.items() if value is not None]
    if len(given) > 1:
        raise ConfigError(f"give one search engine, not both {' and '.join(given)}")
    if simulator is not None and not (Path(simulator) / "config.json").is_file():
        raise ConfigError(f"simulator {simulator} is not a model directory (no config.json)")
    if not given:
        return EngineChoice("world", (world_seed, world_size))
    return EngineChoice(given[0], named[given[0]], noise)


class WorldEngine(SearchEngine):
    """bm25 over World(seed, size)'s documents, indexed into a temporary directory that lives
    as long as the engine (under a second for the small world)."""

    name = "world-bm25"

    def __init__(self, seed: int, size: str) -> None:
        from toolgym.tools.search.index import build_index, load_engine

        self.directory = tempfile.TemporaryDirectory(prefix="toolgym-world-")
        root = Path(self.directory.name)
        corpus = write_corpus(root / "corpus.jsonl", World(seed, size).documents())
        build_index(corpus, "bm25", root / "index")
        self.engine = load_engine(root / "index")

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        return await self.engine.search(queries, topk)

    async def aclose(self) -> None:
        await self.engine.aclose()
        self.directory.cleanup()
