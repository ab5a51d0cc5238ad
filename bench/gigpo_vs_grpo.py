"""GiGPO versus GRPO and RLOO on Maze or text games: the same start model, seeds and
env-step budget.

For each seed, trains once with each estimator (`--estimators`, everything else equal),
records rollout success against cumulative env steps, and reports how many env steps each
needs before its success (a moving average over `--window` steps) first reaches
`--threshold`. The ratio GRPO (or RLOO) steps / GiGPO steps is the GiGPO paper's central
claim at toy scale: above 1 means GiGPO needs fewer env steps. Whatever it comes out to is what we report. Those are training
draws; the claim rests on the held-out figures printed after them: each estimator's success
at the end on the recipe's eval split (items training never drew) and on its transfer sets
(`eval.sets`), with the start's, over seeds with 95% intervals, and GiGPO's difference from
GRPO paired by seed.

    python bench/gigpo_vs_grpo.py --model DIR [--config configs/maze_gigpo.yaml] [--seeds 3]
        [--steps 30] [--threshold 0.5] [--estimators gigpo grpo rloo] [section.field=value ...]

Start from a model that already acts in the env (e.g. after `toolgym sft`), or neither
estimator gets a reward to learn from. For the longer-horizon mazes (the goal farthest from
the start), `--config configs/maze_far_gigpo.yaml --model runs/sft-far --threshold 0.55`,
the model made as that config's header says.

With `--env textworld` it runs configs/textworld_gigpo.yaml once per coin-collector level in
`--levels` (the quest's length: rooms to walk), so it shows whether GiGPO's lead grows with
the horizon, as the paper claims. Each level gets its own games and its own SFT from
`--model`, the recipe's pretrained base (made once under `--out`):

    python bench/gigpo_vs_grpo.py --env textworld --model models/pt_tiny --levels 2 4 \
        --out runs/gigpo-vs-grpo-textworld
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import HeldOut, steps_to_threshold

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.run.plot import plot_runs

CONFIGS = Path(__file__).parent.parent / "configs"
DEFAULT_CONFIG = {
    "maze": CONFIGS / "maze_gigpo.yaml",
    "textworld": CONFIGS / "textworld_gigpo.yaml",
}
TRAIN_GAMES, EVAL_GAMES = 300, 32
SFT = ["--lr", "3e-3", "--no-tool-schemas"]
"""The recipe's warm start (configs/textworld_gigpo.yaml's header, with --sft-episodes and
--sft-epochs), at each level."""


def toolgym(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "toolgym", *args], check=True)


def text_game_level(
    base: str, out: Path, level: int, episodes: int, epochs: int
) -> tuple[str, list[str]]:
    """The SFT model and the overrides of one coin-collector level: its game pool (made on
    every core first) and twice its length in turns; SFT from `base`, as the recipe's."""
    game = {"family": "coin_collector", "level": level}
    pool = {"train": TRAIN_GAMES, "eval": EVAL_GAMES}
    env = {"game": json.dumps(game), "pool": json.dumps(pool), "max_turns": str(2 * level)}
    sft = out / "sft"
    if not (sft / "config.json").is_file():
        toolgym("textworld", "generate", "--game", env["game"], "--out", str(out / "games"),
                "--count", str(TRAIN_GAMES + EVAL_GAMES))  # fmt: skip
        env_args = [a for k, v in env.items() for a in ("--env-arg", f"{k}={v}")]
        toolgym("sft", "toolgym/TextWorld-v0", "--model", base, "--out", str(sft), *SFT,
                "--episodes", str(episodes), "--epochs", str(epochs), *env_args,
                "--env-arg", "solver_slips=0.5")  # fmt: skip
    return str(sft), [f"env.kwargs.{k}={v}" for k, v in env.items()]


def settings(args: argparse.Namespace, out: Path) -> list[tuple[str, str, list[str]]]:
    """(label, start model, overrides) of each setting compared: Maze's one, or one per
    text-game level."""
    if args.env == "maze":
        return [("maze", args.model, [])]
    made = []
    for level in args.levels:
        folder = out / f"level-{level}"
        model, overrides = text_game_level(
            args.model, folder, level, args.sft_episodes, args.sft_epochs
        )
        made.append((f"level {level}", model, overrides))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--env", choices=sorted(DEFAULT_CONFIG), default="maze")
    parser.add_argument(
        "--config", help="the recipe both runs share (by default the env's: maze_gigpo.yaml, ...)"
    )
    parser.add_argument(
        "--levels", type=int, nargs="+", default=[2, 4], help="coin-collector levels (textworld)"
    )
    parser.add_argument("--sft-episodes", type=int, default=1200, help="(textworld)")
    parser.add_argument("--sft-epochs", type=int, default=4, help="(textworld)")
    parser.add_argument(
        "--estimators", nargs="+", default=["gigpo", "grpo", "rloo"],
        choices=["gigpo", "grpo", "rloo"], help="the first is the one the others are set against",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--out", default=None, help="directory for runs and the curve PNG")
    parser.add_argument("overrides", nargs="*", help="extra section.field=value settings for all")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="gigpo-vs-grpo-"))
    config_path = Path(args.config) if args.config else DEFAULT_CONFIG[args.env]
    for label, model, setting in settings(args, out):
        print(f"\n== {label}")
        compare(args, config_path, out / label.replace(" ", "-"), [f"model={model}", *setting])
    png = plot_runs(
        sorted(out.glob("**/*-seed*")), out / "curves.png", ["rollout/success", "rollout/reward"]
    )
    print(f"curves: {png}")


def compare(args: argparse.Namespace, config_path: Path, out: Path, setting: list[str]) -> None:
    """Each estimator, each seed, in one setting; prints steps to the threshold and each
    estimator's ratio to the first's."""
    estimators = list(dict.fromkeys(args.estimators))
    reached: dict[str, list[float | None]] = {e: [] for e in estimators}
    finals: dict[str, list[float]] = {e: [] for e in estimators}
    held_out = HeldOut(baseline="grpo" if "grpo" in estimators else estimators[-1])
    for seed in range(args.seeds):
        for estimator in estimators:
            run = out / f"{estimator}-seed{seed}"
            overrides = [
                f"run_dir={run}",
                f"seed={seed}",
                f"steps={args.steps}",
                f"advantage.estimator={estimator}",
                "eval.every_steps=1000000",  # at the start and the end only
                f"eval.at_start={estimator == estimators[0]}",  # one start per seed
                *setting,
                *args.overrides,
            ]
            config = load_config(TrainConfig, config_path, overrides)
            metrics = held_out.train(estimator, config)
            reached[estimator].append(steps_to_threshold(metrics, args.threshold, args.window))
            finals[estimator].append(
                statistics.mean(m["rollout/success"] for m in metrics[-args.window :])
            )
            curve = " ".join(f"{m['rollout/success']:.2f}" for m in metrics)
            print(f"seed {seed} {estimator:5}: success per step {curve}")
    print(f"env steps until success (mean of {args.window} steps) >= {args.threshold}:")
    for estimator, values in reached.items():
        shown = ", ".join("never" if v is None else f"{v:.0f}" for v in values)
        print(f"  {estimator:5}: {shown}   final success {statistics.mean(finals[estimator]):.2f}")
    first = estimators[0]
    for other in estimators[1:]:
        both = [(a, b) for a, b in zip(reached[first], reached[other], strict=True) if a and b]
        if both:
            ratio = statistics.mean(b for _, b in both) / statistics.mean(a for a, _ in both)
            print(f"ratio {other} / {first} env steps (seeds where both reached it): {ratio:.2f}x")
        else:
            print(f"ratio {other} / {first}: not defined (not both reached it on any seed)")
    print(held_out.report())


if __name__ == "__main__":
    main()
