"""Tokens per second of the hf engine against a plain `model.generate` loop, on the same
multi-turn conversations, at 1, 4, 8 and 16 turns, cold and warm.

Each of `--conversations` conversations starts from its own prompt; after every turn the
answer and a fixed env reply of `--reply` tokens are appended. The engine plays the
conversations concurrently, each as one episode (so it keeps the episode's KV cache between
turns). The baseline replays the very prompts the engine saw, turn by turn, as a plain loop
would: one left-padded `model.generate` call over all conversations per turn, the whole
conversation prefilled again each time. Both sample at temperature 1 up to `--max-tokens`
per turn and stop at the end-of-turn token; tokens/s counts each path's own tokens.

`cold` is the first round of each path in this process (nothing generated before it, so
only the first row has one); `warm` is the median of the rounds after it. The last column is the engine's time per turn divided by its
time per turn at the fewest turns asked for (1.0: cost linear in turns).

    python bench/engine.py [--model DIR] [--turns 1 4 8 16] [--conversations 16]
                           [--max-tokens 32] [--reply 24] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import torch
from common import tiny_model

from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine


async def play(engine: HFEngine, starts: list[list[int]], turns: int, args: argparse.Namespace
               ) -> tuple[int, list[list[list[int]]]]:  # fmt: skip
    """All conversations, concurrently; the generated tokens and each turn's prompts."""
    reply = list(range(7, 7 + args.reply))

    async def conversation(k: int) -> tuple[int, list[list[int]]]:
        sequence, prompts, generated, episode = list(starts[k]), [], 0, object()
        for turn in range(turns):
            prompts.append(list(sequence))
            sampling = SamplingParams(max_tokens=args.max_tokens, seed=turn * 1000 + k)
            completion = await engine.generate(sequence, sampling, episode=episode)
            generated += len(completion.token_ids)
            sequence = sequence + completion.token_ids + reply
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--reply", type=int, default=24, help="env reply tokens per turn")
    parser.add_argument("--prompt", type=int, default=200, help="first prompt's tokens")
    parser.add_argument("--repeats", type=int, default=3, help="warm rounds (median)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    from toolgym.agents.device import resolve_precision

    engine = HFEngine(tiny_model(args.model), precision=resolve_precision(args.device))
    vocab = engine.vocab_size
    starts = [
        [(11 * k + 3 * i) % (vocab - 40) + 20 for i in range(args.prompt + 7 * k)]
        for k in range(args.conversations)
    ]
    rows = []
    for turns in args.turns:  # rounds alternate between the paths, so load drifts hit both
        rates: dict[str, list[float]] = {"engine": [], "generate": []}
        per_turn = []
        for _ in range(1 + args.repeats):
            start = time.perf_counter()
            tokens, prompts = asyncio.run(play(engine, starts, turns, args))
            seconds = time.perf_counter() - start
            rates["engine"].append(tokens / seconds)
            per_turn.append(seconds / turns)
            start = time.perf_counter()
            tokens = generate_loop(engine, prompts, args.max_tokens)
            rates["generate"].append(tokens / (time.perf_counter() - start))
        rows.append((turns, rates, statistics.median(per_turn[1:])))
    asyncio.run(engine.aclose())
    print(
        f"hf engine vs model.generate, {args.conversations} conversations, first prompt "
        f"{args.prompt}+ tokens, up to {args.max_tokens} tokens a turn, {args.reply}-token "
        f"replies, {engine.precision.describe()}; warm: median of {args.repeats} rounds"
    )
    print(
        f"{'turns':>5} {'engine cold':>12} {'engine warm':>12} {'generate cold':>14} "
        f"{'generate warm':>14} {'warm ratio':>11} {'s/turn':>7} {'vs fewest':>10}"
    )
    base = rows[0][2]
    for n, (turns, rates, per_turn) in enumerate(rows):
        warm = {k: statistics.median(v[1:]) for k, v in rates.items()}
        cold = {k: f"{v[0]:,.0f}" if n == 0 else "-" for k, v in rates.items()}
        print(
            f"{turns:5d} {cold['engine']:>12} {warm['engine']:12,.0f} "
            f"{cold['generate']:>14} {warm['generate']:14,.0f} "
            f"{warm['engine'] / warm['generate']:10.2f}x {per_turn:7.3f} {per_turn / base:9.2f}x"
        )


if __name__ == "__main__":
    main()
