"""`toolgym model init` and `toolgym serve model`."""

from __future__ import annotations

from pathlib import Path

from toolgym.cli.show import console


def init_command(arch: str, size: str, out: Path, seed: int) -> int:
    from toolgym.agents.modelinit import init_model

    path = init_model(out, arch, size, seed)
    console.print(
        f"Wrote a {size} {arch} model with its tokenizer and chat template to [bold]{path}[/]"
    )
    return 0


def serve_command(
    model_dir: Path, host: str, port: int, served_model_name: str | None, max_body_mb: int = 16,
    max_choices: int = 256,
) -> int:  # fmt: skip
    from toolgym.agents.server import ServerLimits, serve_model

    if not (model_dir / "config.json").is_file():
        from toolgym.errors import ConfigError

        raise ConfigError(
            f"{model_dir} is not a model directory (no config.json); make one with `toolgym model init`"
        )
    limits = ServerLimits(max_body_bytes=max_body_mb * 1024 * 1024, max_choices=max_choices)
    serve_model(model_dir, host, port, served_model_name, limits=limits)
    return 0
