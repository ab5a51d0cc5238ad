"""The implicit PRM learns, on Maze, to score the steps of successful trajectories above
those of failed ones.

It is measured where it cannot cheat: every training step the PRM scores that step's fresh
trajectories before it learns from their outcomes, so `implicit_prm/separation` (the mean
step reward of the group's preferred trajectories minus its rejected ones) and
`implicit_prm/score_accuracy` (the share of success-over-failure pairs it orders right by
mean step reward) are held-out figures. At step 0 the PRM is the policy itself, and scores
about 0 everywhere.

Measured: configs/maze_gigpo_prm.yaml from the quickstart's SFT policy (3x3 mazes, its
seed 0, which reads the maze: 70% held-out success), 8 steps, training seeds 0, 1 and 2
(separation x 1000 / score accuracy):

| run | step 0 | step 1 | steps 1-3, mean | steps 4-7, mean |
|---|---|---|---|---|
| seed 0 | 0.0 / 0.50 | 7.4 / 0.92 | 37.7 | 25.5 / 0.85 |
| seed 1 | 0.0 / 0.85 | 25.1 / 1.00 | 12.7 (-0.1 at step 3) | 3.8 / 0.53 |
| seed 2 | 0.0 / 0.70 | 15.3 / 0.92 | 5.8 (-5.9 at step 2) | 9.4 / 0.68 |

(Step 0's accuracies are ties broken by float noise: every score there is about 0.) The
separation moves a lot from step to step (the reward is the PRM's log-ratio to the current
policy, which GiGPO moves towards what the PRM has learned), and single steps went below 0.
What held in all three, as in the five runs from the earlier, maze-blind SFT policy: after
its first update the PRM scores the next step's fresh trajectories with separation above 0,
and above 0 on average over steps 1-3. That is asserted, over 4 steps; single later steps
are not.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_ok

pytestmark = pytest.mark.timeout(1200)

STEPS = 4


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
    assert 1 in separation and len(separation) >= STEPS - 1, f"steps {sorted(separation)} scored"
    if 0 in separation:
        assert abs(separation[0]) < 1e-3  # the PRM is the policy: no opinion yet
    assert separation[1] > 0, separation
    assert np.mean([v for step, v in separation.items() if step >= 1]) > 0, separation
