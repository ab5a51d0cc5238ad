"""`toolgym index build` and `toolgym serve search`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.cli.show import console
from toolgym.errors import ConfigError


def index_command(
    corpus: Path, out: Path, kind: str, faiss: str, encoder: str | None, e5: bool, force: bool
) -> int:
    from toolgym.cli.progress import Stages
    from toolgym.tools.search.index import build_index, read_meta

    start = time.perf_counter()
    dense: dict[str, Any] = {"faiss_kind": faiss, "encoder": encoder, "e5": e5}
    with Stages() as stages:
        build_index(corpus, kind, out, force, stages, **(dense if kind != "bm25" else {}))
    meta = read_meta(out)
    console.print(
        f"indexed {meta['documents']} documents ({kind}) into {out} "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return 0


def world_command(
    corpus: Path, questions: Path | None, seed: int, size: str, n: int, hops: list[int]
) -> int:
    import json

    from toolgym.envs.search.world import SIZES, World
    from toolgym.tools.search.corpus import write_corpus

    if size not in SIZES:
        raise ConfigError(f"--size {size!r}: choose one of {', '.join(SIZES)}")
    world = World(seed, size)
    documents = world.documents()
    tasks = [q.to_task() for h in hops for q in world.questions(n, h)] if questions else []
    try:
        write_corpus(corpus, documents)
        if questions is not None:
            questions.parent.mkdir(parents=True, exist_ok=True)
            questions.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename}: {exc.strerror}") from None
    console.print(f"wrote {len(documents)} documents to {corpus}", markup=False)
    if questions is not None:
        console.print(f"wrote {len(tasks)} questions to {questions}", markup=False)
    return 0


@dataclass(frozen=True)
class Simulator:
    """`toolgym serve search`'s simulated-engine options."""

    model_dir: str | None
    url: str | None
    model: str | None
    noise: tuple[float, float, float]
    total_steps: int
    doc_tokens: int
    temperature: float
    cache: int
    max_documents: int
    engine_kind: str = "hf"
    """The in-process engine `model_dir` writes with."""

    @property
    def chosen(self) -> bool:
        return self.model_dir is not None or self.url is not None

    def check(self) -> None:
        if self.model_dir is not None and self.url is not None:
            raise ConfigError("give --simulator or --simulator-url, not both")
        if self.url is not None and not self.model:
            raise ConfigError("--simulator-url needs --simulator-model (the name it serves)")
        if self.model_dir is not None and not (Path(self.model_dir) / "config.json").is_file():
            raise ConfigError(
                f"--simulator {self.model_dir} is not a model directory (no config.json)"
            )
        for name, value, least in (("total-steps", self.total_steps, 1),
                                   ("doc-tokens", self.doc_tokens, 1), ("cache", self.cache, 0),
                                   ("max-documents", self.max_documents, 1)):  # fmt: skip
            if value < least:
                raise ConfigError(f"--{name} must be at least {least}, got {value}")
        if self.engine_kind not in ("hf", "vllm"):
            raise ConfigError(f"--simulator-engine must be hf or vllm, got {self.engine_kind!r}")
        if not 0 <= self.temperature <= 10:
            raise ConfigError(f"--temperature must be in [0, 10], got {self.temperature}")

    def engine(self) -> Any:
        from toolgym.agents.writer import ChatWriter, EngineWriter
        from toolgym.tools.search.engines.simulated import NoiseSchedule, SimulatedEngine

        schedule = NoiseSchedule(*self.noise)
        writer = (EngineWriter.load(self.model_dir, self.engine_kind) if self.model_dir is not None
                  else ChatWriter(str(self.url), str(self.model)))  # fmt: skip
        engine = SimulatedEngine(writer, schedule, max_tokens=self.doc_tokens,
                                 temperature=self.temperature, cache_size=self.cache,
                                 max_documents=self.max_documents)  # fmt: skip
        engine.set_training_step(0, self.total_steps)
        return engine, writer


def serve_command(
    index: Path | None, simulator: Simulator, host: str, port: int, topk: int, max_topk: int,
    max_queries: int, max_body_mb: int, threads: int = 0,
) -> int:  # fmt: skip
    from toolgym.cores import size_compute_pools
    from toolgym.http import serve
    from toolgym.tools.search.server import Limits, SearchServer

    if (index is None) == (not simulator.chosen):
        raise ConfigError(
            "give an --index to serve, or a --simulator (or --simulator-url), one of them"
        )
    limits = Limits(
        max_topk=max_topk, max_queries=max_queries, max_body_bytes=max_body_mb * 1024 * 1024
    )
    if index is not None:
        from toolgym.tools.search.index import load_engine, read_meta

        meta = read_meta(index)
        server = SearchServer(load_engine(index), meta["documents"], limits, default_topk=topk)
        what = f"{meta['kind']} index {index} ({meta['documents']} documents)"
        computes = meta["kind"] != "bm25"  # an encoder embeds each query
    else:
        simulator.check()
        engine, writer = simulator.engine()
        server = SearchServer(engine, None, limits, default_topk=topk)
        what = f"documents written by {simulator.model_dir or simulator.url}"
        computes = simulator.model_dir is not None  # a model writes here
    if computes:
        size_compute_pools(threads or None)
    app = server.app()
    if index is None:
        app.on_cleanup.append(lambda _: writer.aclose())
    console.print(f"serving {what} on http://{host}:{port}/retrieve")
    serve(app, host, port, announce=None)  # a client that disconnects drops its queries
    return 0
