"""How often GiGPO's anchor states recur in a policy's groups, keyed by the env's exact
`state_key` and by similarity (advantage.anchor_similarity), on any recipe's env.

Plays `--groups` groups of the recipe's training tasks (its rollouts_per_task episodes each,
at its temperature) with the policy at `--model`, once, and reports for each anchor rule the
share of turns after the first whose anchor another turn of their group shares
(`adv/anchor_coverage_after_first`, the turns where step credit differs from the episode's)
and the anchors a group has, on average. No training: it says, before a run, whether GiGPO's
step level will have anything to compare.

    python bench/anchor_coverage.py --model DIR --config configs/code_gigpo.yaml
        [--groups 32] [--thresholds 0.9,0.8,0.6] [--seed 0] [section.field=value ...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Hashable

from toolgym.agents.trajectory import Trajectory
from toolgym.config import load_config
from toolgym.training.advantages import GroupRewards
from toolgym.training.advantages.metrics import advantage_metrics
from toolgym.training.config import TrainConfig
from toolgym.training.player import rollout_metrics
from toolgym.training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--thresholds", default="0.9,0.8,0.6")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="section.field=value settings")
    args = parser.parse_args()
    overrides = [
        *args.overrides, f"model={args.model}", f"run_dir={tempfile.mkdtemp()}",
        f"rollout.tasks_per_step={args.groups}", "optim.minibatches=1",
        "optim.micro_batch_size=1", "tensorboard=false",
    ]  # fmt: skip
    config = load_config(TrainConfig, args.config, overrides)
    trainer = Trainer(config)
    try:
        requests = trainer.groups.requests(args.seed, args.groups)
        temperature = config.rollout.temperature
        groups = trainer.player.collect(requests, temperature=temperature, sampling_seed=args.seed)
    finally:
        trainer.close()
    played = rollout_metrics("r", [t for g in groups for t in g.trajectories], 0.0, [])
    print(f"{len(groups)} groups of {config.rollout.rollouts_per_task}: {played['r/turns']:.1f} "
          f"turns an episode, success {played['r/success']:.3f}")  # fmt: skip
    rules = [None, *(float(x) for x in args.thresholds.split(",") if x)]
    for rule in rules:
        coverage = advantage_metrics([], groups, rule).get("adv/anchor_coverage_after_first")
        anchors = statistics.mean(
            len({k for keys in anchor_keys(g.trajectories, rule) for k in keys}) for g in groups
        )
        name = "exact state_key" if rule is None else f"similarity >= {rule}"
        shown = "no turn after the first" if coverage is None else f"{coverage:.3f}"
        print(f"  {name:18} coverage after the first turn {shown}   {anchors:.1f} anchors a group")


def anchor_keys(trajectories: list[Trajectory], rule: float | None) -> list[list[Hashable]]:
    """Each step's anchor under `rule` (None: the exact state_key)."""
    return GroupRewards.from_trajectories(trajectories, anchor_similarity=rule).state_keys


if __name__ == "__main__":
    main()
