"""`toolgym search simulator-data`, `simulator-sft` and `simulator-report`: ZeroSearch's
simulator fine-tuning on CPU, from a real engine's labelled results."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from toolgym.cli.show import console
from toolgym.errors import ConfigError


def data_command(out: Path, server_url: str | None, index: Path | None, world_seed: int,
                 world_size: str, questions: int, hops: list[int], topk: int) -> int:  # fmt: skip
    from toolgym.envs.resources import Resources
    from toolgym.envs.search.engine import choose_engine
    from toolgym.envs.search.simulator_data import label_results, write_results
    from toolgym.envs.search.world import SIZES, World

    if world_size not in SIZES:
        raise ConfigError(f"--world-size must be one of {', '.join(SIZES)}, got {world_size!r}")
    if questions < 1:
        raise ConfigError(f"--questions must be at least 1, got {questions}")
    world = World(world_seed, world_size)
    names = {e.id: e.name for e in world.entities.values()}
    try:
        asked = [q for h in hops for q in world.questions(questions, h)]
    except ValueError as exc:
        raise ConfigError(f"{exc}; ask for fewer --questions") from None
    choice = choose_engine(server_url, index, world_seed, world_size)

    async def run() -> list:
        resources = Resources({})
        engine = await choice.open(resources)
        try:
            return await label_results(engine, asked, names, topk)
        finally:
            await engine.aclose()
            await resources.aclose()

    results = asyncio.run(run())
    write_results(out, results)
    splits = {s: [r for r in results if r.split == s] for s in ("train", "eval")}
    console.print(
        f"{len(results)} labelled results for {len(asked)} questions into {out}: "
        + ", ".join(
            f"{s} {len(rs)} ({sum(r.useful for r in rs)} useful)" for s, rs in splits.items()
        )
    )
    return 0


def sft_command(data: Path, model: Path, out: Path, epochs: int, lr: float, batch_size: int,
                noisy_per_query: int, seed: int, samples: int, doc_tokens: int) -> int:  # fmt: skip
    from toolgym.agents.models.loading import load_model, load_tokenizer
    from toolgym.agents.render import ChatRenderer
    from toolgym.cli.progress import Ticker
    from toolgym.envs.search.simulator_data import read_results
    from toolgym.training.supervised.sft import SFTConfig, demonstration_nll, sft
    from toolgym.training.supervised.simulator_sft import demonstrations

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the model")
    results = read_results(data)
    policy = load_model(model)  # checks the directory first
    tokenizer = load_tokenizer(model)
    renderer = ChatRenderer(tokenizer)
    demos = demonstrations(renderer, results, "train", doc_tokens, noisy_per_query)
    held_out = demonstrations(renderer, results, "eval", doc_tokens, noisy_per_query)
    if not demos:
        raise ConfigError(f"{data} has no train rows to learn from")
    useful = sum(d.trajectory.steps[0].state_key == "useful" for d in demos)
    console.print(
        f"{len(demos)} documents to imitate ({useful} useful, {len(demos) - useful} noisy)"
    )
    start = time.perf_counter()
    before = demonstration_nll(policy, held_out, tokenizer.pad_token_id) if held_out else None
    with Ticker("fine-tuning the simulator", None) as ticker:

        def step(done: int, total: int, loss: float) -> None:
            ticker.total = total
            ticker.advance(done, f"loss {loss:.3f}")

        losses = sft(policy, demos, tokenizer.pad_token_id,
                     SFTConfig(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed),
                     on_step=step)  # fmt: skip
    console.print(f"loss per epoch: {', '.join(f'{x:.3f}' for x in losses)} "
                  f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
    if held_out and before is not None:
        after = demonstration_nll(policy, held_out, tokenizer.pad_token_id)
        console.print(f"held-out document NLL per token: {before:.3f} -> {after:.3f}")
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    tokenizer.save_pretrained(out)
    console.print(
        f"saved to [bold]{out}[/]; serve it with `toolgym serve search --simulator {out}`"
    )
    if samples > 0:
        return report_command(data, out, samples, doc_tokens)
    return 0


def report_command(data: Path, simulator: Path, samples: int, doc_tokens: int) -> int:
    from toolgym.agents.writer import EngineWriter
    from toolgym.envs.search.simulator_data import read_results
    from toolgym.training.supervised.simulator_quality import quality

    if not (simulator / "config.json").is_file():
        raise ConfigError(f"{simulator} is not a model directory (no config.json)")
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    results = read_results(data)
    writer = EngineWriter.load(simulator)
    try:
        report = {}
        for split in ("train", "eval"):
            if any(r.split == split for r in results):
                report[split] = quality(writer, results, split, samples, doc_tokens).to_json()
    finally:
        asyncio.run(writer.aclose())
    for split, q in report.items():
        console.print(
            f"{split} ({q['queries']} queries): written useful hold the answer {q['useful']:.1%}, "
            f"written noisy {q['noisy']:.1%}; the real engine's first result {q['real_top1']:.1%}, "
            f"any of its results {q['real_any']:.1%}"
        )
    (simulator / "simulator_quality.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


def search_simulator_data(
    out: Annotated[Path, typer.Option(help="JSONL file to write the labelled results to.")],
    server_url: Annotated[
        str | None, typer.Option(help="A Search-R1 /retrieve server to play against.")
    ] = None,
    index: Annotated[Path | None, typer.Option(help="An index directory to play against.")] = None,
    world_seed: Annotated[int, typer.Option(help="The synthetic world the questions are on.")] = 0,
    world_size: Annotated[str, typer.Option(help="small, medium or large.")] = "small",
    questions: Annotated[int, typer.Option(help="Questions per hop count.")] = 200,
    hops: Annotated[
        list[int] | None, typer.Option(help="Hop counts to ask (repeatable; default 1 and 2).")
    ] = None,
    topk: Annotated[int, typer.Option(help="Real results kept per query.")] = 5,
) -> None:
    """Label a real engine's results for the world's questions: useful if it holds the answer."""

    raise typer.Exit(
        data_command(
            out=out,
            server_url=server_url,
            index=index,
            world_seed=world_seed,
            world_size=world_size,
            questions=questions,
            hops=hops or [1, 2],
            topk=topk,
        )
    )


def search_simulator_sft(
    data: Annotated[Path, typer.Option(help="Labelled results from `simulator-data`.")],
    model: Annotated[Path, typer.Option(help="Model directory to fine-tune.")],
    out: Annotated[Path, typer.Option(help="Directory to write the simulator to.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the documents.")] = 40,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-3,
    batch_size: Annotated[int, typer.Option(min=1, help="Documents per optimizer step.")] = 16,
    noisy_per_query: Annotated[
        int, typer.Option(help="Best-ranked noisy results kept per query.")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Shuffling seed.")] = 0,
    samples: Annotated[
        int, typer.Option(help="Documents written per query and kind for the report (0: none).")
    ] = 2,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per document.")] = 128,
) -> None:
    """Fine-tune a model to write useful or noisy documents on demand (ZeroSearch)."""

    raise typer.Exit(
        sft_command(
            data=data,
            model=model,
            out=out,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            noisy_per_query=noisy_per_query,
            seed=seed,
            samples=samples,
            doc_tokens=doc_tokens,
        )
    )


def search_simulator_report(
    data: Annotated[Path, typer.Option(help="Labelled results from `simulator-data`.")],
    simulator: Annotated[Path, typer.Option(help="Model directory that writes the documents.")],
    samples: Annotated[int, typer.Option(help="Documents written per query and kind.")] = 2,
    doc_tokens: Annotated[int, typer.Option(help="Most tokens per document.")] = 128,
) -> None:
    """How often a simulator's documents hold the answer, next to the real engine's."""

    raise typer.Exit(
        report_command(data=data, simulator=simulator, samples=samples, doc_tokens=doc_tokens)
    )
