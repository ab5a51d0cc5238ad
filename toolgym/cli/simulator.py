"""`toolgym search simulator-data`, `simulator-sft` and `simulator-report`: ZeroSearch's
simulator fine-tuning on CPU, from a real engine's labelled results."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

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
