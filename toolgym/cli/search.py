"""`toolgym index build` and `toolgym serve search`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

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


def index_build(
    corpus: Annotated[Path, typer.Option(help='JSONL corpus, one {"id", "contents"} a line.')],
    out: Annotated[Path, typer.Option(help="Index directory to write.")],
    kind: Annotated[str, typer.Option(help="bm25, dense or hybrid (both, fused by RRF).")] = "bm25",
    faiss: Annotated[str, typer.Option(help="Dense index: flat, hnsw or ivfpq.")] = "flat",
    encoder: Annotated[
        str | None, typer.Option(help="Local sentence-transformers model directory.")
    ] = None,
    e5: Annotated[bool, typer.Option(help="Prefix 'query: ' / 'passage: ' (E5 models).")] = False,
    force: Annotated[bool, typer.Option(help="Replace OUT if it is not empty.")] = False,
) -> None:
    """Index a corpus for `toolgym serve search` and the search envs."""

    raise typer.Exit(
        index_command(
            corpus=corpus, out=out, kind=kind, faiss=faiss, encoder=encoder, e5=e5, force=force
        )
    )


def serve_search(
    index: Annotated[
        Path | None, typer.Option(help="Index directory from `toolgym index build`.")
    ] = None,
    simulator: Annotated[
        str | None,
        typer.Option(help="Model directory that writes the documents (a simulated engine)."),
    ] = None,
    simulator_url: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible server that writes the documents (e.g. vLLM)."),
    ] = None,
    simulator_model: Annotated[
        str | None, typer.Option(help="The model name to ask --simulator-url for.")
    ] = None,
    simulator_engine: Annotated[
        str,
        typer.Option(help="The engine --simulator writes with: hf, or vllm (`make vllm`)."),
    ] = "hf",
    noise: Annotated[
        tuple[float, float, float],
        typer.Option(help="Noise schedule p_start p_end base, read at a request's step."),
    ] = (0.0, 0.5, 4.0),
    total_steps: Annotated[
        int, typer.Option(help="Training steps the schedule spans, when a request gives none.")
    ] = 1,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per written document.")] = 96,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the writer.")] = 1.0,
    cache: Annotated[int, typer.Option(help="Seeded documents kept in memory.")] = 4096,
    max_documents: Annotated[
        int, typer.Option(help="Most documents one request may ask to be written (queries x topk).")
    ] = 8192,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    topk: Annotated[int, typer.Option(help="Results per query when a request gives none.")] = 3,
    max_topk: Annotated[int, typer.Option(help="Largest topk a request may ask for.")] = 100,
    max_queries: Annotated[
        int, typer.Option(help="Most queries in one request (Search-R1 sends a whole batch's).")
    ] = 16384,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 64,
    threads: Annotated[
        int,
        typer.Option(
            min=0,
            help="Threads for the encoder or writer model (0: this process's share of the host).",
        ),
    ] = 0,
) -> None:
    """Serve an index, or a model that writes the results, over Search-R1's retriever API
    (POST /retrieve, GET /health)."""

    sim = Simulator(
        model_dir=simulator, url=simulator_url, model=simulator_model, noise=noise,
        total_steps=total_steps, doc_tokens=doc_tokens, temperature=temperature, cache=cache,
        max_documents=max_documents, engine_kind=simulator_engine,
    )  # fmt: skip
    raise typer.Exit(serve_command(
        index=index, simulator=sim, host=host, port=port, topk=topk, max_topk=max_topk,
        max_queries=max_queries, max_body_mb=max_body_mb, threads=threads,
    ))  # fmt: skip


def search_world(
    corpus: Annotated[
        Path, typer.Option(help='JSONL corpus to write, one {"id", "contents"} a line.')
    ],
    questions: Annotated[
        Path | None,
        typer.Option(help='Also write questions, one {"question", "answers"} a line (tasks=).'),
    ] = None,
    seed: Annotated[int, typer.Option(help="Which synthetic world.")] = 0,
    size: Annotated[str, typer.Option(help="small, medium or large.")] = "small",
    n: Annotated[int, typer.Option("-n", min=1, help="Questions per hop count.")] = 200,
    hops: Annotated[
        list[int] | None, typer.Option(help="Hop counts to ask (repeatable; default 1 and 2).")
    ] = None,
) -> None:
    """Write the synthetic world's documents (a corpus to index) and questions about it."""

    raise typer.Exit(
        world_command(
            corpus=corpus, questions=questions, seed=seed, size=size, n=n, hops=hops or [1, 2]
        )
    )
