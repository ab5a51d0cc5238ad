"""`toolgym index build` and `toolgym serve search`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from toolgym.cli.show import console


def index_command(
    corpus: Path, out: Path, kind: str, faiss: str, encoder: str | None, e5: bool, force: bool
) -> int:
    from toolgym.tools.search.index import build_index, read_meta

    start = time.perf_counter()
    dense: dict[str, Any] = {"faiss_kind": faiss, "encoder": encoder, "e5": e5}
    build_index(corpus, kind, out, force=force, **(dense if kind != "bm25" else {}))
    meta = read_meta(out)
    console.print(
        f"indexed {meta['documents']} documents ({kind}) into {out} "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return 0


def serve_command(
    index: Path, host: str, port: int, topk: int, max_topk: int, max_queries: int, max_body_mb: int
) -> int:
    from aiohttp import web

    from toolgym.tools.search.index import load_engine, read_meta
    from toolgym.tools.search.server import Limits, SearchServer

    meta = read_meta(index)
    engine = load_engine(index)
    limits = Limits(
        max_topk=max_topk, max_queries=max_queries, max_body_bytes=max_body_mb * 1024 * 1024
    )
    server = SearchServer(engine, meta["documents"], limits, default_topk=topk)
    console.print(
        f"serving {meta['kind']} index {index} ({meta['documents']} documents) "
        f"on http://{host}:{port}/retrieve"
    )
    # a client that disconnects drops its queued queries
    web.run_app(server.app(), host=host, port=port, print=None, handler_cancellation=True)
    return 0
