"""`toolgym sandbox build-image|run` and `toolgym serve sandbox`."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

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


def serve_sandbox(
    backend: Annotated[
        str, typer.Option(help="bubblewrap, docker (or local: unisolated).")
    ] = "bubblewrap",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    pool_size: Annotated[int, typer.Option(help="Sandboxes kept warm.")] = 4,
    concurrency: Annotated[
        int | None, typer.Option(help="Runs at once (default: the pool size).")
    ] = None,
    max_timeout: Annotated[
        float, typer.Option(help="Largest run_timeout honoured, in seconds (more is cut to it).")
    ] = 30.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit of a run, in MiB.")] = 1024,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 32,
) -> None:
    """Serve a warm sandbox pool over SandboxFusion's API (POST /run_code, GET /health)."""

    raise typer.Exit(serve_command(backend=backend, host=host, port=port, pool_size=pool_size, concurrency=concurrency, max_timeout=max_timeout, memory_mb=memory_mb, max_body_mb=max_body_mb))  # fmt: skip


def sandbox_build_image(
    tag: Annotated[str, typer.Option(help="Image name to build.")] = "toolgym-sandbox:latest",
    suite: Annotated[
        str | None, typer.Option(help="Debian release for debootstrap (default: this host's).")
    ] = None,
    mirror: Annotated[str | None, typer.Option(help="Debian mirror for debootstrap.")] = None,
    base: Annotated[
        str | None,
        typer.Option(help="Build FROM this image instead (where a registry is reachable)."),
    ] = None,
) -> None:
    """Build the Docker backend's image locally (debootstrap + docker import; needs root)."""

    raise typer.Exit(build_image_command(tag=tag, suite=suite, mirror=mirror, base=base))


def sandbox_run(
    code: Annotated[str | None, typer.Argument(help="The code to run.")] = None,
    file: Annotated[Path | None, typer.Option(help="Run this file instead.")] = None,
    language: Annotated[str, typer.Option(help="python or bash.")] = "python",
    backend: Annotated[str, typer.Option(help="bubblewrap, docker or local.")] = "bubblewrap",
    timeout: Annotated[float, typer.Option(help="Wall-clock limit, in seconds.")] = 10.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit, in MiB.")] = 1024,
    stdin: Annotated[bool, typer.Option(help="Pass this command's stdin to the code.")] = False,
) -> None:
    """Run code once in a sandbox and exit with its exit code."""

    raise typer.Exit(
        run_command(
            code=code,
            file=file,
            language=language,
            backend=backend,
            timeout=timeout,
            memory_mb=memory_mb,
            stdin=stdin,
        )
    )
