"""The implicit PRM learns, on Maze, to score the steps of successful trajectories above
those of failed ones.

It is measured where it cannot cheat: every training step the PRM scores that step's fresh
trajectories before it learns from their outcomes, so `implicit_prm/separation` (the mean
step reward of the group's preferred trajectories minus its rejected ones) and
`implicit_prm/score_accuracy` (the share of success-over-failure pairs it orders right by
mean step reward) are held-out figures. At step 0 the PRM is the policy itself, and scores
about 0 everywhere.

Measured: configs/maze_gigpo_prm.yaml from the quickstart's SFT policy (3x3 mazes, seed 0),
8 steps (separation x 1000 / score accuracy):

| run | step 0 | step 1 | steps 1-3, min separation | steps 4-7, mean |
|---|---|---|---|---|
| seed 0 | 0.0 / 0.76 | 295.7 / 1.00 | 22.8 | 26.4 / 0.78 |
| seed 1 | 0.0 / 0.48 | 7.9 / 1.00 | 7.9 (4.4 at step 4) | 31.1 / 0.76 |
| seed 2 | 0.0 / 0.59 | 12.1 / 0.73 | 12.1 | 21.9 / 0.79 |
| CI, seed 0 | 0.0 / 0.47 | 13.8 / 0.53 | -4.5 at step 3 | 11.8 / 0.51 |
| CI, two workers | 0.0 | 29.5 | -13.0 at step 2 (mean 11.4) | -3.6 |

(Step 0's accuracies are ties broken by float noise: every score there is about 0.) The
separation moves a lot from step to step (the reward is the PRM's log-ratio to the current
policy, which GiGPO moves towards what the PRM has learned), and late in a run it did not
hold: the fifth run's steps 4-7 averaged below 0. What held in all five: after its first
update the PRM scores the next step's fresh trajectories with separation above 0, and above
0 on average over steps 1-3. That is asserted, over 4 steps; the late figure is not.
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
