"""The README's main job as CI runs it: on held-out 3x3 mazes that training never drew (the env
splits its mazes by content), the SFT policy must read the maze and GiGPO must lift its
success, and the run must report success with its interval on the held-out and the 4x4
transfer mazes.

Measured (toolgym quickstart, seeds 0, 1 and 2; 91 held-out 3x3 mazes, temperature 1):
- SFT success 70.3%, 53.8%, 52.7%: it reads the maze (a policy moving through a random open
  exit solves 29.3% of them; the earlier 150-step warm start, whose moves ignored the maze,
  12-17%); asserted: 45%;
- SFT -> SFT + 40 GiGPO steps: 70.3% -> 78.0%, 53.8% -> 67.0%, 52.7% -> 59.3% (+7.7, +13.2,
  +6.6 points; mean +9.2, +0.4 to +17.9 over seeds); the in-run evaluations at steps 10,
  20 and 30 were above the start too, in every seed (12 of 12, the least by 1.1 points);
  asserted: above the start. Greedy: +2.2, +6.6, -1.1, not asserted;
- valid tool calls after GiGPO: 100%, 100%, 99.5%; asserted: 95%.
The SFT stage is deterministic on a given machine; the RL stage is not bit-reproducible
(batched decoding pads rows differently from run to run).
"""

from __future__ import annotations

import json

import pytest

from toolgym.cli.quickstart import ENV_ARGS, EVAL_EPISODES
from toolgym.envs.maze import MazeEnv

pytestmark = pytest.mark.timeout(1500)

SFT_READS = 0.45
VALID_AFTER = 0.95
STEPS, TASKS_PER_STEP = 40, 16


def test_quickstart_trains_on_mazes_it_is_not_evaluated_on(quickstart_run):
    out, result = quickstart_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SFT + GiGPO" in result.stdout and "4x4 transfer" in result.stdout
    results = json.loads((out / "results.json").read_text())
    before, after = results["before_rl"]["1.0"], results["after_rl"]["1.0"]
    assert before["eval/success"] >= SFT_READS, before
    assert after["eval/success"] > before["eval/success"], (before, after)
    assert after["eval/valid_actions"] >= VALID_AFTER, after
    for policy in (before, after, results["before_rl"]["0.0"], results["after_rl"]["0.0"]):
        for key in ("eval/", "eval/4x4/"):
            assert policy[f"{key}items"] == EVAL_EPISODES  # distinct mazes, each played once
            low, rate, high = (policy[f"{key}success{s}"] for s in ("_low", "", "_high"))
            assert 0 <= low <= rate <= high <= 1 and high - low < 0.3
    assert "change, paired by maze" in result.stdout
    for temperature in ("1.0", "0.0"):  # the change paired maze by maze is the rates' change
        sft, trained = results["before_rl"][temperature], results["after_rl"][temperature]
        for key in ("eval/", "eval/4x4/"):
            low, change, high = (trained[f"{key}change{s}"] for s in ("_low", "", "_high"))
            assert low <= change <= high
            assert change == pytest.approx(trained[f"{key}success"] - sft[f"{key}success"])
    # the held-out mazes are none of those training drew, by what the policy sees
    env = MazeEnv(**ENV_ARGS)
    source = env.task_source()
    trained = {source.item_of(d.seed) for d in source.head("train", STEPS * TASKS_PER_STEP)}
    held = {source.item_of(d.seed) for d in source.head("eval", EVAL_EPISODES)}
    assert len(held) == EVAL_EPISODES and not trained & held
    assert (out / "curves.png").stat().st_size > 5000
    assert (out / "rl" / "policy" / "config.json").is_file()
    # saved with the settings it was trained with, so `toolgym eval --model` plays it alike
    settings = json.loads((out / "rl" / "policy" / "toolgym_env.json").read_text())
    assert settings["env_id"] == "toolgym/Maze-v0" and settings["tool_schemas"] is False
    assert settings["env_kwargs"]["size"] == 3 and settings["env_kwargs"]["far_goal"] is False
