"""GiGPO alone against GiGPO plus a process reward (the implicit PRM, Monte-Carlo step
values): the same start model, seeds and settings, on Maze (the quickstart's, or the
longer-horizon far-goal mazes) or on two-hop search.

For each seed, trains once per variant and reports:
- success per step, and the final success (mean of the last `--window` steps);
- env steps until success (a moving average over `--window` steps) first reaches
  `--threshold`, counting the policy's own episodes and, for Monte-Carlo values, the
  branches' too (replayed steps included); the ratio against GiGPO alone (above 1: the
  variant needs fewer);
- the wall time of a training step against GiGPO alone's, measured in the same run: what
  the process reward costs;
- the figures the claim rests on: each variant's success at the end on the recipe's eval
  split (items training never drew) and its transfer sets, with the start's, over seeds with
  95% intervals, and each variant's difference from GiGPO alone, paired by seed.

    python bench/process_rewards.py --model DIR [--task maze|maze_far|search] [--seeds 3]
        [--steps 30] [--threshold 0.5] [--variants gigpo,prm,mc] [--equal-env-steps]
        [section.field=value ...]

With `--equal-env-steps` each variant trains until it has spent the env steps GiGPO alone
spent in that seed (branches counted), so a Monte-Carlo run makes fewer updates; without
it, every variant makes `--steps` updates. `--task maze_far` trains on
configs/maze_far_gigpo.yaml (start from the SFT policy its header builds).

`--task search` trains on configs/search_gigpo_prm.yaml's two-hop questions (start from the
SFT policy its header builds); its variants differ only in their reward sources. The
overrides go to every variant, e.g. harder mazes than the quickstart's:
`env.kwargs.size=3 env.kwargs.max_turns=10` (start from an SFT policy of those mazes).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import ADDED, MC, PRM, HeldOut, steps_to_threshold

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.run.metrics import env_steps_spent
from toolgym.training.run.plot import plot_runs

CONFIGS = Path(__file__).parent.parent / "configs"
SEARCH = CONFIGS / "search_gigpo_prm.yaml"
FAR = CONFIGS / "maze_far_gigpo.yaml"
TASKS: dict[str, dict[str, tuple[Path, list[str]]]] = {
    "maze": {
        "gigpo": (CONFIGS / "maze_gigpo.yaml", []),
        "prm": (CONFIGS / "maze_gigpo_prm.yaml", []),
        "mc": (CONFIGS / "maze_gigpo_mc.yaml", []),
    },
    "maze_far": {  # the longer horizon: a quest of 2 to 8 moves, about 10 turns an episode
        "gigpo": (FAR, []),
        "prm": (FAR, [f"rewards=[{{source: env}}, {PRM}]"]),
        "mc": (FAR, [f"rewards=[{{source: env}}, {MC}]", ADDED]),
    },
    "search": {
        "gigpo": (SEARCH, ["rewards=[{source: env}]"]),
        "prm": (SEARCH, []),
        "mc": (SEARCH, [f"rewards=[{{source: env}}, {MC}]", ADDED]),
    },
}
"""Each task's variants: a config and the overrides that make the variant from it."""


def step_seconds(record: dict) -> float:
    return record["time/rollout_s"] + record["time/advantage_s"] + record["time/update_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", choices=sorted(TASKS), default="maze")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--variants", default="gigpo,prm,mc")
    parser.add_argument(
        "--equal-env-steps",
        action="store_true",
        help="give each variant the env steps GiGPO alone spent in the seed (max_env_steps; "
        "steps capped at 4x --steps), not the same number of steps",
    )
    parser.add_argument("--out", default=None, help="directory for runs and the curve PNG")
    parser.add_argument("overrides", nargs="*", help="section.field=value settings for all")
    args = parser.parse_args()
    names = sorted(args.variants.split(","), key=lambda n: n != "gigpo")  # gigpo first
    variants = TASKS[args.task]
    if "gigpo" not in names or not set(names) <= set(variants):
        parser.error(f"--variants: a comma list from {list(variants)} that includes gigpo")
    out = Path(args.out or tempfile.mkdtemp(prefix="process-rewards-"))
    reached: dict[str, list[float | None]] = {n: [] for n in names}
    finals: dict[str, list[float]] = {n: [] for n in names}
    seconds: dict[str, list[float]] = {n: [] for n in names}
    spent: dict[str, list[float]] = {n: [] for n in names}
    held_out = HeldOut(baseline="gigpo")
    for seed in range(args.seeds):
        budget: list[str] = []
        for name in names:
            run = out / f"{name}-seed{seed}"
            path, variant = variants[name]
            overrides = [*variant,
                f"model={args.model}", f"run_dir={run}", f"seed={seed}", f"steps={args.steps}",
                "eval.every_steps=1000000", f"eval.at_start={name == 'gigpo'}",
                "tensorboard=false", *args.overrides, *budget,
            ]  # fmt: skip
            config = load_config(TrainConfig, path, overrides)
            metrics = held_out.train(name, config)
            reached[name].append(
                steps_to_threshold(metrics, args.threshold, args.window, cost=env_steps_spent)
            )
            finals[name].append(
                statistics.mean(m["rollout/success"] for m in metrics[-args.window :])
            )
            seconds[name].append(statistics.mean(step_seconds(m) for m in metrics))
            spent[name].append(sum(env_steps_spent(m) for m in metrics))
            if name == "gigpo" and args.equal_env_steps:
                budget = [f"steps={4 * args.steps}", f"max_env_steps={int(spent[name][-1])}"]
            curve = " ".join(f"{m['rollout/success']:.2f}" for m in metrics)
            print(f"seed {seed} {name:5}: success per step {curve} "
                  f"({len(metrics)} steps, {spent[name][-1]:.0f} env steps)", flush=True)  # fmt: skip
    base_s = statistics.mean(seconds["gigpo"])
    print(f"\nenv steps (branches included) until success >= {args.threshold} "
          f"(mean of {args.window} steps); final success; seconds per training step:")  # fmt: skip
    for name in names:
        shown = ", ".join("never" if v is None else f"{v:.0f}" for v in reached[name])
        cost = statistics.mean(seconds[name])
        print(f"  {name:5}: {shown}   final {statistics.mean(finals[name]):.3f}   "
              f"{cost:.2f} s/step ({cost / base_s:.2f}x gigpo's)")  # fmt: skip
    for name in names:
        if name == "gigpo":
            continue
        both = [(g, v) for g, v in zip(reached["gigpo"], reached[name], strict=True) if g and v]
        if both:
            ratio = statistics.mean(g for g, _ in both) / statistics.mean(v for _, v in both)
            print(f"ratio gigpo / {name} env steps (seeds where both reached it): {ratio:.2f}x")
        else:
            print(f"ratio gigpo / {name}: not defined (not both reached it on any seed)")
    print(held_out.report())
    png = plot_runs(sorted(out.glob("*-seed*")), out / "curves.png", ["rollout/success"])
    print(f"curves: {png}")


if __name__ == "__main__":
    main()
