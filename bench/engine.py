"""Tokens per second of the hf engine, the vllm engine and a plain `model.generate` loop, on
the same multi-turn conversations, at 1, 4 and 16 turns, cold and warm; then the wall time of
one training step of the Maze recipe generating with each engine.

Each of `--conversations` conversations starts from its own prompt; after every turn the
answer and a fixed env reply of `--reply` tokens are appended. The engine plays the
conversations concurrently, each as one episode (so it keeps the episode's KV cache between
turns). The baseline replays the very prompts the engine saw, turn by turn, as a plain loop
would: one left-padded `model.generate` call over all conversations per turn, the whole
conversation prefilled again each time. Both sample at temperature 1 up to `--max-tokens`
per turn and stop at the end-of-turn token; tokens/s counts each path's own tokens.

The vllm engine (vLLM's CPU build on a CPU machine, `make vllm`) plays the same
conversations with its own seeds, each turn's prompt whole: its prefix cache finds the
conversation so far. Its samples differ from hf's, so the token counts differ too; tokens/s
counts its own. The model is `mini` (the smallest whose heads vLLM's CPU attention runs).

`cold` is the first round of each path in this process (nothing generated before it, so
only the first row has one); `warm` is the median of the rounds after it. `s/turn` is the
hf engine's time per turn, and `vs fewest` that divided by its time per turn at the fewest
turns asked for (1.0: cost linear in turns).

The training step: configs/maze_gigpo.yaml's settings from the same model (16 mazes x 4
rollouts, four mini-batches), `--train-steps` steps on each engine after a first step that
is left out (it loads and warms up); the median seconds per step (rollout, update, sync).

    python bench/engine.py [--model DIR] [--turns 1 4 16] [--conversations 16]
                           [--max-tokens 32] [--reply 24] [--repeats 3] [--device cpu]
                           [--train-steps 3] [--no-vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from common import tiny_model

from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.runtime import Runtime

ROOT = Path(__file__).resolve().parent.parent


async def play(engine: Any, starts: list[list[int]], turns: int, args: argparse.Namespace
               ) -> tuple[int, list[list[list[int]]]]:  # fmt: skip
    """All conversations, concurrently; the generated tokens and each turn's prompts. The hf
    engine keeps each conversation's KV cache as an episode; vLLM finds it in its prefix
    cache."""
    reply = list(range(7, 7 + args.reply))
    episodes = isinstance(engine, HFEngine)

    async def conversation(k: int) -> tuple[int, list[list[int]]]:
        sequence, prompts, generated, episode = list(starts[k]), [], 0, object()
        for turn in range(turns):
            prompts.append(list(sequence))
            sampling = SamplingParams(max_tokens=args.max_tokens, seed=turn * 1000 + k)
            extra = {"episode": episode} if episodes else {}
            completion = await engine.generate(sequence, sampling, **extra)
            generated += len(completion.token_ids)
            sequence = sequence + completion.token_ids + reply
        if episodes:
            engine.end_episode(episode)
        return generated, prompts

    played = await asyncio.gather(*(conversation(k) for k in range(len(starts))))
    return sum(g for g, _ in played), [p for _, p in played]


@torch.no_grad()
def generate_loop(engine: HFEngine, prompts: list[list[list[int]]], max_tokens: int) -> int:
    """A plain loop: per turn, one `model.generate` over every conversation's prompt."""
    model, pad, generated = engine.model, engine.pad_id, 0
    for turn in range(len(prompts[0])):
        batch = [p[turn] for p in prompts]
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with engine.precision.autocast():
            out = model.generate(
                input_ids=ids.to(engine.precision.device),
                attention_mask=mask.to(engine.precision.device),
                do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                max_new_tokens=max_tokens, pad_token_id=pad, eos_token_id=sorted(engine.end_ids),
            )  # fmt: skip
        new = out[:, width:].cpu()
        finished = torch.isin(new, torch.tensor(sorted(engine.end_ids)))
        lengths = torch.where(
            finished.any(-1), finished.int().argmax(-1) + 1, torch.full((len(batch),), new.shape[1])
        )
        generated += int(lengths.sum())
    return generated


def train_step_s(model: Path, kind: str, steps: int) -> float:
    """The median seconds of a Maze recipe's training step on engine `kind` (its first step
    left out)."""
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig
    from toolgym.training.trainer import Trainer

    run_dir = tempfile.mkdtemp(prefix=f"toolgym-bench-{kind}-")
    config = load_config(
        TrainConfig, ROOT / "configs" / "maze_gigpo.yaml",
        [f"model={model}", f"run_dir={run_dir}", f"engine.kind={kind}", f"steps={1 + steps}",
         "eval.every_steps=1000", "eval.episodes=1", "eval.sets=[]", "tensorboard=false"],
    )  # fmt: skip
    metrics = Trainer(config).run()
    seconds = [
        m["time/rollout_s"] + m["time/advantage_s"] + m["time/update_s"] + m.get("time/sync_s", 0)
        for m in metrics[1:]
    ]
    return statistics.median(seconds)


def rounds(
    runtime: Runtime, engine: Any, starts: list[list[int]], turns: int, args: argparse.Namespace
) -> tuple[list[float], list[float], list[list[list[int]]]]:
    """1 + repeats rounds of `engine` on the conversations: tokens/s, seconds per turn, and
    the last round's prompts."""
    rates, per_turn, prompts = [], [], []
    for _ in range(1 + args.repeats):
        start = time.perf_counter()
        tokens, prompts = runtime.run(play(engine, starts, turns, args))
        seconds = time.perf_counter() - start
        rates.append(tokens / seconds)
        per_turn.append(seconds / turns)
    return rates, per_turn, prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--reply", type=int, default=24, help="env reply tokens per turn")
    parser.add_argument("--prompt", type=int, default=200, help="first prompt's tokens")
    parser.add_argument("--repeats", type=int, default=3, help="warm rounds (median)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--no-vllm", action="store_true", help="leave the vllm engine out")
    args = parser.parse_args()
    from toolgym.agents.models.device import resolve_precision

    model = tiny_model(args.model, size="mini")
    precision = resolve_precision(args.device)
    runtime = Runtime()  # one event loop for every round: vLLM's client stays on its own
    engine = HFEngine(model, precision=precision)
    vllm = None
    if not args.no_vllm:
        from toolgym.agents.engines.vllm_inproc import VLLMEngine

        dtype = str(precision.dtype).removeprefix("torch.")
        vllm = runtime.run(start_vllm(VLLMEngine, str(model), dtype))
    vocab = engine.vocab_size
    starts = [
        [(11 * k + 3 * i) % (vocab - 40) + 20 for i in range(args.prompt + 7 * k)]
        for k in range(args.conversations)
    ]
    rows = []
    for turns in args.turns:  # the paths take turns, so load drifts hit all of them
        rates, per_turn, prompts = rounds(runtime, engine, starts, turns, args)
        generate = []
        for _ in range(1 + args.repeats):
            start = time.perf_counter()
            tokens = generate_loop(engine, prompts, args.max_tokens)
            generate.append(tokens / (time.perf_counter() - start))
        vllm_rates = rounds(runtime, vllm, starts, turns, args)[0] if vllm else [float("nan")] * 2
        rows.append((turns, {"engine": rates, "generate": generate, "vllm": vllm_rates},
                     statistics.median(per_turn[1:])))  # fmt: skip
    runtime.run(engine.aclose())
    if vllm is not None:
        runtime.run(vllm.aclose())
    runtime.close()
    print(
        f"hf engine, vllm engine and model.generate, {args.conversations} conversations, "
        f"first prompt {args.prompt}+ tokens, up to {args.max_tokens} tokens a turn, "
        f"{args.reply}-token replies, mini model, {precision.describe()}; warm: median of "
        f"{args.repeats} rounds"
    )
    print(
        f"{'turns':>5} {'hf cold':>9} {'hf warm':>9} {'vllm cold':>10} {'vllm warm':>10} "
        f"{'generate cold':>14} {'generate warm':>14} {'vllm/hf':>8} {'hf/generate':>12} "
        f"{'s/turn':>7} {'vs fewest':>10}"
    )
    base = rows[0][2]
    for n, (turns, rates, per_turn) in enumerate(rows):
        warm = {k: statistics.median(v[1:]) for k, v in rates.items()}
        cold = {k: f"{v[0]:,.0f}" if n == 0 else "-" for k, v in rates.items()}
        print(
            f"{turns:5d} {cold['engine']:>9} {warm['engine']:9,.0f} {cold['vllm']:>10} "
            f"{warm['vllm']:10,.0f} {cold['generate']:>14} {warm['generate']:14,.0f} "
            f"{warm['vllm'] / warm['engine']:7.2f}x {warm['engine'] / warm['generate']:11.2f}x "
            f"{per_turn:7.3f} {per_turn / base:9.2f}x"
        )
    if args.train_steps:
        kinds = ["hf"] + (["vllm"] if vllm is not None else [])
        step_s = {kind: train_step_s(model, kind, args.train_steps) for kind in kinds}
        print(f"one training step of configs/maze_gigpo.yaml (median of {args.train_steps}):")
        for kind, seconds in step_s.items():
            print(f"  {kind:>5}: {seconds:6.2f} s ({seconds / step_s['hf']:.2f}x hf)")


async def start_vllm(cls: Any, model: str, dtype: str) -> Any:
    return cls(model, dtype=dtype)


if __name__ == "__main__":
    main()
