"""Which search engine a search env talks to: a `/retrieve` server, an index directory loaded
in-process, a model that writes the results (simulated), or (the default) a bm25 index over
the built-in synthetic world, built once per process in a temporary directory (under a second
for the small world)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from toolgym.envs.search.world import World
from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import write_corpus
from toolgym.tools.search.engines.base import SearchEngine


def make_engine(
    server_url: str | None,
    index: str | Path | None,
    world_seed: int,
    world_size: str,
    simulator: str | Path | None = None,
    noise: tuple[float, float, float] = (0.0, 0.5, 4.0),
    engine: SearchEngine | None = None,
) -> SearchEngine:
    """The one engine the arguments name (`engine`: a ready instance), else the world's."""
    named = {"engine": engine, "server_url": server_url, "index": index, "simulator": simulator}
    given = [name for name, value in named.items() if value is not None]
    if len(given) > 1:
        raise ConfigError(f"give one search engine, not both {' and '.join(given)}")
    if engine is not None:
        return engine
    if simulator is not None:
        return simulated_engine(simulator, noise)
    if server_url is not None:
        from toolgym.tools.search.client import RemoteEngine

        return RemoteEngine(server_url)
    if index is not None:
        return _load(str(index))
    return world_engine(world_seed, world_size)


def simulated_engine(model_dir: str | Path, noise: tuple[float, float, float]) -> SearchEngine:
    """A model directory writes the documents (ZeroSearch-style, noise p_s, p_e, b)."""
    from toolgym.agents.engines.hf import HFEngine
    from toolgym.agents.render import ChatRenderer
    from toolgym.tools.search.engines.simulated import NoiseSchedule, SimulatedEngine

    if not (Path(model_dir) / "config.json").is_file():
        raise ConfigError(f"simulator {model_dir} is not a model directory (no config.json)")
    engine = HFEngine(model_dir)
    return SimulatedEngine(engine, ChatRenderer(engine.tokenizer), NoiseSchedule(*noise))


@functools.cache
def _load(index: str) -> SearchEngine:
    from toolgym.tools.search.index import load_engine

    return load_engine(index)


def world_engine(seed: int, size: str) -> SearchEngine:
    """bm25 over World(seed, size)'s documents."""
    return _world_index(seed, size)[0]


@functools.cache
def _world_index(seed: int, size: str) -> tuple[SearchEngine, tempfile.TemporaryDirectory[str]]:
    """The engine and its directory, cached together so the directory lives as long as the
    process and is removed at exit."""
    from toolgym.tools.search.index import build_index, load_engine

    directory = tempfile.TemporaryDirectory(prefix="toolgym-world-")
    root = Path(directory.name)
    corpus = write_corpus(root / "corpus.jsonl", World(seed, size).documents())
    build_index(corpus, "bm25", root / "index", show_progress=False)
    return load_engine(root / "index"), directory
