"""`toolgym model init` and `toolgym serve model`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from toolgym.cli.options import EnvArgs
from toolgym.cli.show import console
from toolgym.cli.tables import print_table


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
    print_table(table, console)


def model_init(
    out: Annotated[Path, typer.Option(help="Directory to write the model to.")],
    arch: Annotated[
        str, typer.Option(help="qwen2, llama or qwen2_vl (vision-language).")
    ] = "qwen2",
    size: Annotated[
        str, typer.Option(help="tiny (0.16M parameters), mini (0.9M) or small (4.2M).")
    ] = "tiny",
    seed: Annotated[int, typer.Option(help="Weight initialisation seed.")] = 0,
) -> None:
    """Build a small causal LM with a locally trained tokenizer (no downloads)."""

    raise typer.Exit(init_command(arch=arch, size=size, out=out, seed=seed))


def model_pretrain(
    out: Annotated[Path, typer.Option(help="Directory to write the model to.")],
    size: Annotated[str, typer.Option(help="tiny, mini or small.")] = "tiny",
    arch: Annotated[
        str, typer.Option(help="qwen2, llama or qwen2_vl (vision-language).")
    ] = "qwen2",
    steps: Annotated[int, typer.Option(help="Optimizer steps, the copy warm-up included.")] = 1400,
    seq_len: Annotated[int, typer.Option(help="Tokens per training sequence.")] = 640,
    batch_size: Annotated[int, typer.Option(help="Sequences per step.")] = 8,
    lr: Annotated[
        float | None,
        typer.Option(
            help="Peak AdamW learning rate (by size if unset: tiny 3e-3, mini 1e-3, small 5e-4)."
        ),
    ] = None,
    copy_warmup_steps: Annotated[
        int, typer.Option(help="First steps on periodic random rows, so copying forms first.")
    ] = 400,
    periodic_share: Annotated[
        float,
        typer.Option(help="Share of periodic rows after the warm-up; the rest is corpus text."),
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Seeds the corpus, tokenizer and weights.")] = 0,
    env: Annotated[
        list[str] | None,
        typer.Option(help="Mix this env's scripted transcripts into the corpus (repeatable)."),
    ] = None,
    env_arg: EnvArgs = None,
    probes: Annotated[
        int, typer.Option(help="Probe contexts per kind and distance after training (0: none).")
    ] = 100,
) -> None:
    """Pretrain a built-in size on CPU on generated text that teaches copying and tool calls."""
    from toolgym.cli.train import env_kwargs
    from toolgym.training.supervised.pretrain import PretrainConfig

    kwargs = env_kwargs(env_arg or [])
    config = PretrainConfig(
        size=size, arch=arch, steps=steps, seq_len=seq_len, batch_size=batch_size, lr=lr,
        copy_warmup_steps=copy_warmup_steps, periodic_share=periodic_share, seed=seed, envs=list(env or []), env_kwargs={e: kwargs for e in env or []},
    )  # fmt: skip
    raise typer.Exit(
        pretrain_command(out=out, config=config, distances=[100, 250, 500], probes=probes)
    )


def model_probe(
    model_dir: Annotated[Path, typer.Argument(help="Model directory.")],
    n: Annotated[int, typer.Option("-n", help="Contexts per kind and distance.")] = 100,
    distance: Annotated[
        list[int] | None, typer.Option(help="Tokens back (repeatable; default 100, 250, 500).")
    ] = None,
) -> None:
    """Measure copying and key-value recall at several distances back in the context."""

    raise typer.Exit(probe_command(model_dir=model_dir, distances=distance or [100, 250, 500], n=n))


def serve_model(
    model_dir: Annotated[
        Path, typer.Argument(help="A model directory (e.g. from `toolgym model init`).")
    ],
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    served_model_name: Annotated[
        str | None, typer.Option(help="Model name clients use (default: the path as given).")
    ] = None,
    max_body_mb: Annotated[int, typer.Option(help="Largest request body, in MiB.")] = 16,
    max_choices: Annotated[
        int, typer.Option(help="Most completions one request may ask for (prompts x n).")
    ] = 256,
    threads: Annotated[
        int,
        typer.Option(
            min=0, help="Threads for the model's compute (0: this process's share of the host)."
        ),
    ] = 0,
) -> None:
    """Serve a model over an OpenAI-compatible API (completions, chat, LoRA routes)."""

    raise typer.Exit(
        serve_command(
            model_dir=model_dir,
            host=host,
            port=port,
            served_model_name=served_model_name,
            max_body_mb=max_body_mb,
            max_choices=max_choices,
            threads=threads,
        )
    )
