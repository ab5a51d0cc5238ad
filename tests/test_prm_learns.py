"""The implicit PRM learns, on Maze, to score the steps of successful trajectories above
those of failed ones.

It is measured where it cannot cheat: every training step the PRM scores that step's fresh
trajectories before it learns from their outcomes, so `implicit_prm/separation` (the mean
step reward of the group's preferred trajectories minus its rejected ones) and
`implicit_prm/score_accuracy` (the share of success-over-failure pairs it orders right by
mean step reward) are held-out figures. At the first step the PRM is the policy itself, and
scores about 0 everywhere.

Measured: configs/maze_gigpo_prm.yaml from the quickstart's SFT policy (3x3 mazes, its
seed 0, warm-started on a solver that slips once in half its episodes), 8 steps. With the
PRM's scores redistributed (the recipe since the longer horizon showed added ones paying
malformed calls), training seeds 0 to 2 (separation x 1000):

| run | step 1 (the first) | steps 2-3, mean | steps 4-8, mean | steps 4-8, least |
|---|---|---|---|---|
| seed 0 | 0.0 | 13.8 | 9.7 | 0.5 |
| seed 1 | 0.0 | 13.7 | 9.8 | 0.0 |
| seed 2 | 0.0 | 0.1 (-2.7 at step 3) | 82.3 | -4.8 |

With the scores added (the recipe before), nine runs held the same margin: six training
seeds from the SFT policy's one-thread warm start and three from its two-thread one (CI's
two cores make that one); this file's history has their table.

The separation moves a lot from step to step (the reward is the PRM's log-ratio to the current
policy, which GiGPO moves towards what the PRM has learned), and single steps go below 0,
as they did at step 3 of seed 2. What held in all twelve runs: from its fourth step on the
PRM scores fresh trajectories with separation above 0 on average (steps 4 to the last).
That is asserted, over 8 steps, with the first step's separation about 0; single later
steps are not.
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
    first = min(separation)
    if first == 1:
        assert abs(separation[first]) < 1e-3  # the PRM is the policy: no opinion yet
    later = [v for step, v in separation.items() if step >= 4]
    assert later and np.mean(later) > 0, separation
