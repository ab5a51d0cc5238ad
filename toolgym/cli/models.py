"""`toolgym model init` and `toolgym serve model`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolgym.cli.show import console


def init_command(arch: str, size: str, out: Path, seed: int) -> int:
    from toolgym.agents.models.fresh import init_model

    path = init_model(out, arch, size, seed)
    console.print(
        f"Wrote a {size} {arch} model with its tokenizer and chat template to [bold]{path}[/]"
    )
    return 0


def serve_command(
    model_dir: Path, host: str, port: int, served_model_name: str | None, max_body_mb: int = 16,
    max_choices: int = 256, threads: int = 0,
) -> int:  # fmt: skip
    from toolgym.agents.serving.server import ServerLimits, serve_model
    from toolgym.cores import size_compute_pools

    if not (model_dir / "config.json").is_file():
        from toolgym.errors import ConfigError

        raise ConfigError(
            f"{model_dir} is not a model directory (no config.json); make one with `toolgym model init`"
        )
    limits = ServerLimits(max_body_bytes=max_body_mb * 1024 * 1024, max_choices=max_choices)
    size_compute_pools(threads or None)
    serve_model(model_dir, host, port, served_model_name, limits=limits)
    return 0


def pretrain_command(out: Path, config: Any, distances: list[int], probes: int) -> int:
    import json

    from toolgym.agents.models.corpus.probes import run_probes
    from toolgym.cli.progress import Ticker
    from toolgym.errors import ConfigError
    from toolgym.training.supervised.pretrain import RECORD, pretrain

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the model")
    with Ticker("pretraining", config.steps) as ticker:

        def on_step(step: int, loss: float) -> None:
            ticker.advance(step + 1, f"loss {loss:.3f}")

        result = pretrain(out, config, on_step)
    console.print(
        f"Pretrained a {config.size} {config.arch} model ({result.parameters:,} parameters) "
        f"for {config.steps} steps in {result.seconds:.0f} s; final loss "
        f"{sum(result.losses[-20:]) / len(result.losses[-20:]):.3f}"
    )
    if probes > 0:
        found = run_probes(result.model, result.tokenizer, distances, probes)
        _print_probes(found)
        record_path = result.path / RECORD
        record = json.loads(record_path.read_text())
        record["probes"] = [vars(p) for p in found]
        record_path.write_text(json.dumps(record, indent=1) + "\n")
    console.print(f"Wrote [bold]{result.path}[/]")
    return 0


def probe_command(model_dir: Path, distances: list[int], n: int) -> int:
    from toolgym.agents.models.corpus.probes import run_probes
    from toolgym.agents.models.loading import load_model, load_tokenizer

    model = load_model(model_dir)
    tokenizer = load_tokenizer(model_dir)
    _print_probes(run_probes(model, tokenizer, distances, n))
    return 0


def _print_probes(results: list[Any]) -> None:
    from rich.table import Table

    table = Table("probe", "tokens back", "exact", "per token")
    for r in results:
        table.add_row(r.kind, str(r.distance), f"{r.accuracy:.1%}", f"{r.token_accuracy:.1%}")
    console.print(table)
