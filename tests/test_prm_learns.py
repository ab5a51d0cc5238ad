"""The implicit PRM learns, on Maze, to score the steps of successful trajectories above
those of failed ones.

It is measured where it cannot cheat: every training step the PRM scores that step's fresh
trajectories before it learns from their outcomes, so `implicit_prm/separation` (the mean
step reward of the group's preferred trajectories minus its rejected ones) and
`implicit_prm/score_accuracy` (the share of success-over-failure pairs it orders right by
mean step reward) are held-out figures. At step 0 the PRM is the policy itself, and scores
about 0 everywhere.

Measured: configs/maze_gigpo_prm.yaml from the quickstart's SFT policy (3x3 mazes, its
seed 0, warm-started on a solver that slips once in half its episodes), 8 steps, training
seeds 0 to 5 from its one-thread warm start and 0 to 2 from its two-thread one (another
policy; CI's two cores make that one) (separation x 1000):

| run | step 1 | steps 1-3, mean | steps 4-7, mean |
|---|---|---|---|
| seed 0 | 3.1 | 10.2 | 41.1 |
| seed 1 | 56.7 | 31.3 | 2.1 |
| seed 2 | 0.1 | -2.6 (-5.6 at step 2) | 2.1 |
| seed 3 | 1.3 | 1.1 | 7.2 |
| seed 4 | 3.1 | 3.2 | 5.9 |
| seed 5 | 3.3 | 3.5 | 24.7 |
| two threads, seed 0 | 2.9 | 3.5 (no pair at step 2) | 3.5 (-7.3 at step 6) |
| two threads, seed 1 | 13.2 | 6.1 | 4.2 |
| two threads, seed 2 | 3.1 | 5.5 | 6.5 |

The separation moves a lot from step to step (the reward is the PRM's log-ratio to the current
policy, which GiGPO moves towards what the PRM has learned), and single steps go below 0;
the mean over steps 1-3 did too, in one run of nine. What held in all nine, with room: from
its fifth step on the PRM scores fresh trajectories with separation above 0 on average
(steps 4-7). That is asserted, over 8 steps; step 1 alone (0.1 at the least) and single
later steps are not. From the earlier slip-free SFT policy, steps 1 and 1-3 held in three
seeds of three, as in five runs from the maze-blind one before it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_ok

pytestmark = pytest.mark.timeout(1200)

STEPS = 8


def test_the_implicit_prm_separates_successful_steps_from_failed_ones(quickstart_run, tmp_path):
    """From the quickstart's SFT policy (its header's commands), as configs/maze_gigpo_prm.yaml
    says to start."""
    quickstart, result = quickstart_run
    assert result.returncode == 0, "the quickstart, whose SFT policy this starts from, failed"
    maze_sft, run = quickstart / "sft", tmp_path / "rl"
    run_ok("train", "--config", "configs/maze_gigpo_prm.yaml", f"model={maze_sft}",
           f"run_dir={run}", f"steps={STEPS}", "eval.every_steps=100", "eval.episodes=8")  # fmt: skip
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # a step whose groups all succeeded or all failed has no pair to separate: no figure
    scored = {r["step"]: r for r in rows if "implicit_prm/separation" in r}
    separation = {step: r["implicit_prm/separation"] for step, r in scored.items()}
    accuracy = {step: r["implicit_prm/score_accuracy"] for step, r in scored.items()}
    print("separation", {k: round(v, 4) for k, v in separation.items()})
    print("score_accuracy", {k: round(v, 3) for k, v in accuracy.items()})
    assert len(separation) >= STEPS - 2, f"steps {sorted(separation)} scored"
    if 0 in separation:
        assert abs(separation[0]) < 1e-3  # the PRM is the policy: no opinion yet
    later = [v for step, v in separation.items() if step >= 4]
    assert later and np.mean(later) > 0, separation
