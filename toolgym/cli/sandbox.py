"""`toolgym sandbox build-image|run` and `toolgym serve sandbox`."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from toolgym.cli.show import console
from toolgym.errors import ConfigError


def build_image_command(tag: str, suite: str | None, mirror: str | None, base: str | None) -> int:
    from toolgym.sandbox.image import build_image

    console.print(f"building the sandbox image {tag} (about a minute) ...")
    start = time.perf_counter()
    image_id = build_image(tag, suite, mirror, base)
    console.print(
        f"built {tag} ({image_id[:19]}) in {time.perf_counter() - start:.0f} s; use it with "
        "--backend docker"
    )
    return 0


def run_command(
    code: str | None, file: Path | None, language: str, backend: str, timeout: float,
    memory_mb: int, stdin: bool,
) -> int:  # fmt: skip
    """Run code once in a sandbox; print its output; exit with its exit code."""
    from toolgym.sandbox import run

    if (code is None) == (file is None):
        raise ConfigError("give the code as an argument or as --file, one of them")
    source = code if code is not None else Path(file).read_text()  # type: ignore[arg-type]
    data = sys.stdin.read() if stdin else ""
    result = asyncio.run(run(source, language, data, timeout_s=timeout, memory_mb=memory_mb,
                             backend=backend))  # fmt: skip
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.status.value not in ("ok", "error"):
        print(f"[{result.status.value}]", file=sys.stderr)
    return result.exit_code if result.exit_code is not None else 1


def serve_command(
    backend: str, host: str, port: int, pool_size: int, concurrency: int | None,
    max_timeout: float, memory_mb: int, max_body_mb: int,
) -> int:  # fmt: skip
    from toolgym.http import serve
    from toolgym.sandbox import Limits, SandboxPool
    from toolgym.sandbox.server import SandboxServer, ServerLimits

    pool = SandboxPool(
        backend, size=pool_size, concurrency=concurrency,
        limits=Limits(timeout_s=max_timeout, memory_mb=memory_mb),
    )  # fmt: skip
    server = SandboxServer(pool, ServerLimits(max_body_bytes=max_body_mb << 20))
    console.print(
        f"serving a {backend} sandbox pool ({pool_size} warm) on http://{host}:{port}/run_code"
    )
    serve(server.app(), host, port, announce=None)
    return 0
