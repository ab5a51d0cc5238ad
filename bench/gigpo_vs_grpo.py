"""GiGPO versus GRPO on Maze: the same start model, seeds and env-step budget.

For each seed, trains once with each estimator (everything else equal), records rollout
success against cumulative env steps, and reports how many env steps each needs before its
success (a moving average over `--window` steps) first reaches `--threshold`. The ratio
GRPO steps / GiGPO steps is the GiGPO paper's central claim at toy scale: above 1 means
GiGPO needs fewer env steps. Whatever it comes out to is what we report.

    python bench/gigpo_vs_grpo.py --model DIR [--config configs/maze_gigpo.yaml] [--seeds 3]
        [--steps 30] [--threshold 0.5] [section.field=value ...]

Start from a model that already writes tool calls (e.g. after `toolgym sft`), or neither
estimator gets a reward to learn from.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import steps_to_threshold

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.plot import plot_runs
from toolgym.training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--config",
        default=str(Path(__file__).parent.parent / "configs" / "maze_gigpo.yaml"),
        help="the recipe both runs share (the quickstart's by default)",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--out", default=None, help="directory for runs and the curve PNG")
    parser.add_argument("overrides", nargs="*", help="extra section.field=value settings for both")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="gigpo-vs-grpo-"))
    reached: dict[str, list[float | None]] = {"gigpo": [], "grpo": []}
    finals: dict[str, list[float]] = {"gigpo": [], "grpo": []}
    for seed in range(args.seeds):
        for estimator in ("gigpo", "grpo"):
            run = out / f"{estimator}-seed{seed}"
            overrides = [
                f"model={args.model}",
                f"run_dir={run}",
                f"seed={seed}",
                f"steps={args.steps}",
                f"advantage.estimator={estimator}",
                "eval.every_steps=1000000",
                *args.overrides,
            ]
            config = load_config(TrainConfig, Path(args.config), overrides)
            metrics = Trainer(config).run(overwrite=True)
            reached[estimator].append(steps_to_threshold(metrics, args.threshold, args.window))
            finals[estimator].append(
                statistics.mean(m["rollout/success"] for m in metrics[-args.window :])
            )
            curve = " ".join(f"{m['rollout/success']:.2f}" for m in metrics)
            print(f"seed {seed} {estimator:5}: success per step {curve}")
    print(f"\nenv steps until success (mean of {args.window} steps) >= {args.threshold}:")
    for estimator, values in reached.items():
        shown = ", ".join("never" if v is None else f"{v:.0f}" for v in values)
        print(f"  {estimator:5}: {shown}   final success {statistics.mean(finals[estimator]):.2f}")
    both = [(g, r) for g, r in zip(reached["gigpo"], reached["grpo"], strict=True) if g and r]
    if both:
        ratio = statistics.mean(r for _, r in both) / statistics.mean(g for g, _ in both)
        print(f"ratio grpo / gigpo env steps (seeds where both reached it): {ratio:.2f}x")
    else:
        print("ratio: not defined (the threshold was not reached by both on any seed)")
    png = plot_runs(
        sorted(out.glob("*-seed*")), out / "curves.png", ["rollout/success", "rollout/reward"]
    )
    print(f"curves: {png}")


if __name__ == "__main__":
    main()
