"""The quickstart's RL recipe in sync and in async mode (eta = 1), over several seeds.

Each seed trains the same SFT start with the quickstart's GiGPO recipe once per mode:
`mode=sync`, `mode=async async_training.max_staleness=1` (the next step's groups play
while the trainer trains; one version stale at most), and with `--modes ... async-decoupled` the same with
decoupled PPO (clipped against the weights before the update, each token weighted by their
probability over the sampling weights'). Prints each run's held-out success (128 mazes, sampled) after the
last step, its env steps and wall clock, and the means.

    python bench/quickstart_async.py --model runs/quickstart/sft [--seeds 3] [--steps 40]
        [--modes sync async async-decoupled]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.quickstart_recipe import ENV_ARGS, ENV_ID, RECIPE
from toolgym.training.trainer import Trainer

MODES = {
    "sync": ["mode=sync"],
    "async": ["mode=async", "async_training.max_staleness=1"],
    "async-decoupled": ["mode=async", "async_training.max_staleness=1", "loss.mode=decoupled"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the quickstart's SFT policy")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--modes", nargs="+", default=["sync", "async"], choices=list(MODES))
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="toolgym-quickstart-async-"))
    finals: dict[str, list[float]] = {mode: [] for mode in args.modes}
    for seed in range(args.seeds):
        for mode in args.modes:
            settings = MODES[mode]
            config = load_config(
                TrainConfig, None,
                [f"model={args.model}", f"run_dir={out / f'{mode}-seed{seed}'}",
                 f"steps={args.steps}", f"seed={seed}", f"env.id={ENV_ID}",
                 f"env.kwargs={ENV_ARGS}", *RECIPE, "tensorboard=false", *settings],
            )  # fmt: skip
            start = time.perf_counter()
            metrics = Trainer(config).run(overwrite=True)
            wall = time.perf_counter() - start
            success = metrics[-1]["eval/success"]
            finals[mode].append(success)
            env_steps = sum(m["env_steps"] for m in metrics)
            print(
                f"seed {seed} {mode:5}: held-out success {success:.1%} after {args.steps} steps, "
                f"{env_steps} env steps, {wall:.0f} s",
                flush=True,
            )
    for mode, values in finals.items():
        shown = ", ".join(f"{v:.1%}" for v in values)
        print(f"{mode:5}: {shown}  mean {statistics.mean(values):.1%}")


if __name__ == "__main__":
    main()
