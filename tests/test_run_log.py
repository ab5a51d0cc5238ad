"""The run as a user reads it: the step line (KL readable), the warnings a run gives with what
to try (no signal, not learning), the exploration and signal figures they read, and the
run log and summary a real run writes."""

from __future__ import annotations

import json
import shutil

import numpy as np

from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.exploration import exploration_metrics, signal_metrics
from toolgym.training.player import rollout_metrics
from toolgym.training.run.advice import Advisor, Settings
from toolgym.training.run.log import step_line, summary_lines
from toolgym.training.run.summary import run_summary
from toolgym.training.trainer import Trainer


def advisor(steps=40, **run):
    return Advisor(Settings(steps=steps, lr=5e-4, rollouts_per_task=4, run_dir="runs/x", **run))


def test_the_step_line_shows_kl_in_decimals_and_leaves_out_rounding():
    record = {"step": 3, "rollout/success": 0.4375, "train/approx_kl": 3.43e-4}
    assert step_line(record, 40, 9.8, 372) == (
        "step  3/40  success 0.438  kl 0.00034  9.8s  eta 6:12"
    )
    # one pass over the batch measures the update against the weights that sampled it:
    # 1e-13 is rounding, and a column of it reads as if nothing trains
    assert "kl" not in step_line(record | {"train/approx_kl": 1e-13}, 40, 1.0, None)
    with_start = record | {"train/kl_ref": 0.0213}  # the KL to the start policy comes first
    assert "kl 0.021 " in step_line(with_start, 40, 1.0, None)
    evaluated = {"step": 40, "eval/success": 0.5, "eval/success_low": 0.41,
                 "eval/success_high": 0.59}  # fmt: skip
    assert "eval 0.500 [0.41, 0.59]  1.0s  eta ?" in step_line(evaluated, 40, 1.0, None)


def signal(groups, equal, succeeded=0):
    return {"signal/groups": groups, "signal/equal_groups": equal,
            "signal/equal_succeeded": succeeded}  # fmt: skip


def test_a_step_with_no_signal_is_told_with_its_cause_then_no_more_than_every_ten_steps():
    a = advisor()
    told = {s: a.read({"step": s, **signal(16, 16)}) for s in range(1, 13)}
    assert [s for s, w in told.items() if w] == [1, 11]
    assert "none of its 16 groups carries a learning signal" in told[1][0]
    assert "16 all failed, 0 all succeeded" in told[1][0] and "too hard" in told[1][0]
    assert "toolgym sft" in told[1][0] and "rollouts_per_task (now 4)" in told[1][0]
    assert "(10 such steps since step 2)" in told[11][0]
    easy = advisor().read({"step": 1, **signal(4, 4, succeeded=3)})
    assert "too easy" in easy[0]


def test_the_advice_follows_what_the_run_already_did():
    """A warm-started run is not told to warm-start as if it had not; a harness run is told
    its own command; a self-play run's tasks are its proposer's, not the env's settings."""
    hard = {"step": 1, **signal(8, 8)}
    warmed = advisor(warm_started=True).read(hard)[0]
    assert (
        "warm start and all" in warmed and "more or better demonstrations (toolgym sft)" in warmed
    )
    harness = advisor(warm_start="toolgym warm-start", warm_started=True).read(hard)[0]
    assert "(toolgym warm-start)" in harness and "toolgym sft" not in harness
    fresh = advisor(warm_start="toolgym warm-start").read(hard)[0]
    assert "warm-start it on demonstrations (toolgym warm-start)" in fresh
    selfplay = advisor(selfplay=True, warm_started=True).read(hard)[0]
    assert "proposed tasks are too hard for the solver" in selfplay
    assert "warm-start" not in selfplay and "env's settings" not in selfplay
    flat = advisor(warm_started=True)
    told = [w for step in range(1, 11) for w in flat.read({"step": step, "rollout/success": 0.4})]
    assert "warm-start it longer (toolgym sft)" in told[0]


def test_a_run_from_a_warm_start_is_advised_as_one(tiny_model_dir, tmp_path):
    """The run reads what it started from: a model saved with env settings was trained on
    the env (by `toolgym sft`, `toolgym warm-start` or an earlier run)."""
    from toolgym.config import load_config
    from toolgym.envs.saved_settings import write_env_settings
    from toolgym.training.config import TrainConfig
    from toolgym.training.run.log import RunLog

    for saved in (False, True):
        model = tmp_path / f"model-{saved}"
        shutil.copytree(tiny_model_dir, model)
        if saved:
            write_env_settings(model, "toolgym/Maze-v0", {}, True)
        run_dir = tmp_path / f"run-{saved}"
        run_dir.mkdir()
        config = load_config(TrainConfig, None, [f"model={model}", f"run_dir={run_dir}"])
        with RunLog(run_dir, config) as log:
            assert log.advisor.settings.warm_started is saved
            assert log.advisor.settings.warm_start == "toolgym sft"


def test_a_step_mostly_without_signal_is_told_once():
    a = advisor()
    assert a.read({"step": 1, **signal(4, 2)}) == []  # half teach: nothing to say
    first = a.read({"step": 2, **signal(4, 3)})
    assert len(first) == 1 and "3 of its 4 groups carry no learning signal" in first[0]
    assert a.read({"step": 3, **signal(4, 3)}) == []


def test_a_run_whose_success_has_not_risen_is_told_once_and_a_learning_run_never():
    flat, rising, ceiling = advisor(), advisor(), advisor()
    told = []
    for step in range(1, 21):
        told += flat.read({"step": step, "rollout/success": 0.40 + 0.01 * (step % 2)})
        assert rising.read({"step": step, "rollout/success": 0.3 + 0.02 * step}) == []
        assert ceiling.read({"step": step, "rollout/success": 0.97}) == []
    assert len(told) == 1 and told[0].startswith("step 10: the run is not learning yet")
    assert "steps 1-5" in told[0] and "steps 6-10" in told[0] and "optim.lr above 0.0005" in told[0]
    assert advisor().read({"step": 0, "eval/success": 0.1}) == []  # the start's evaluation


def turn(state, action, reward=0.0):
    return Step(response_start=0, response_end=0, logprobs=[], action=action, observation=[],
                reward=reward, state_key=state, next_state_key=None)  # fmt: skip


def episode(*turns, masked=False):
    return Trajectory(id="t", steps=list(turns), infra_error="sandbox died" if masked else None)


def test_exploration_counts_distinct_episodes_per_group_and_repeated_turns():
    same = TrajectoryGroup("g1", 0, [episode(turn("s0", "up")), episode(turn("s0", "up"))])
    loop = episode(turn("s0", "up"), turn("s1", "down"), turn("s0", "up"), turn("s0", "left"))
    varied = TrajectoryGroup("g2", 0, [loop, episode(turn("s0", "left")),
                                       episode(turn("s0", "up"), masked=True)])  # fmt: skip
    figures = exploration_metrics([same, varied])
    assert figures["explore/distinct_per_group"] == (1 / 2 + 2 / 2) / 2  # the masked one is out
    assert figures["explore/repeated_actions"] == 1 / 7  # loop's third turn repeats its first


def test_signal_counts_the_trained_groups_whose_advantages_are_all_zero():
    won = [episode(turn("s", "a", 1.0)), episode(turn("s", "a", 1.0))]
    lost = [episode(turn("s", "a")), episode(turn("s", "b"))]
    mixed = [episode(turn("s", "a", 1.0)), episode(turn("s", "b"))]
    frozen = TrajectoryGroup("f", 0, [episode(turn("s", "a"))], untrained="frozen")
    groups = [TrajectoryGroup(n, 0, m) for n, m in (("w", won), ("l", lost), ("m", mixed))]
    trained = won + lost + mixed
    advantages = [np.zeros(1)] * 4 + [np.array([0.7]), np.array([-0.7])]
    assert signal_metrics([*groups, frozen], trained, advantages) == {
        "signal/groups": 3.0, "signal/equal_groups": 2.0, "signal/equal_succeeded": 1.0,
    }  # fmt: skip


def test_the_summary_says_what_was_masked_and_why():
    played = [episode(turn("s", "a", 1.0)), episode(masked=True), episode(masked=True)]
    record = {"step": 1, "env_steps": 1, **rollout_metrics("rollout", played, 1.0, [])}
    assert record["rollout/masked"] == 2 and record["rollout/masked_reasons"] == {"sandbox died": 2}
    config = load_config(TrainConfig, None, ["model=m", "run_dir=r", "steps=2"])
    summary = run_summary(config, [record], "finished", 12.0)
    assert summary["masked"] == {"episodes": 2, "reasons": {"sandbox died": 2}}
    lines = summary_lines(summary)
    assert lines[0].startswith("finished r at step 1 of 2 (1 env steps) in 0:12")
    assert "masked (left out of training and of every rate): 2 episodes: 2 x sandbox died" in lines


def test_a_run_writes_its_log_and_summary_and_warns_where_no_group_can_teach(
    tool_calling_model_dir, tmp_path
):
    """One move can never reach a far goal: every episode earns 0, so no group can teach."""
    config = load_config(TrainConfig, None, [
        f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=2", "tensorboard=false",
        "env.kwargs={size: 3, max_turns: 1, far_goal: true}", "rollout.tasks_per_step=2",
        "rollout.rollouts_per_task=2", "rollout.max_tokens=16", "eval.episodes=2",
        "eval.at_start=true",
        "eval.sets=[{name: test, id: toolgym/Maze-v0, split: test, episodes: 3, "
        "kwargs: {size: 3, max_turns: 1, far_goal: true}}, "
        "{name: 4x4, id: toolgym/Maze-v0, kwargs: {size: 4, max_turns: 1}, episodes: 1}]",
    ])  # fmt: skip
    assert config.held_out_sets == ["test"]  # the run's own mazes; 4x4 is a transfer set
    metrics = Trainer(config).run()
    assert [m["signal/equal_groups"] for m in metrics if m["step"]] == [2.0, 2.0]
    log = (tmp_path / "train.log").read_text().splitlines()
    told = [line for line in log if "carries a learning signal" in line]
    assert len(told) == 1 and "warning: step 1: none of its 2 groups" in told[0]
    steps = [line.split("  ")[1].split()[1] for line in log if "  step " in line]
    assert steps == ["0/2", "1/2", "2/2"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 2
    assert summary["start"]["step"] == 0 and summary["end"]["step"] == 2
    assert summary["start"]["success"] == summary["end"]["success"] == 0.0
    # one held-out figure: the eval split and the test split pooled, 2 + 3 mazes; each set's
    # own beside it, the transfer set's too
    assert summary["held_out"] == ["eval", "test"] and summary["start"]["items"] == 5
    assert metrics[0]["held_out/items"] == 5 and "held_out/success" in metrics[-1]
    assert {name: f["end"]["items"] for name, f in summary["sets"].items()} == {
        "eval": 2, "test": 3, "4x4": 1,
    }  # fmt: skip
    assert any("held-out success at the start (step 0) (pooled: eval, test)" in line
               for line in log)  # fmt: skip
    transfer = "0.000 (95% 0.000 to 0.793, 1 items)"
    assert any(line.endswith(f"eval set 4x4: start {transfer}; end {transfer}") for line in log)
    assert summary["no_signal_steps"] == 2 and summary["env_steps"] == metrics[-1]["env_steps"] * 2
    assert log[-1].endswith("steps whose groups all carried no signal: 2")


def test_rollouts_show_wraps_long_messages_to_a_narrow_terminal(tmp_path):
    from conftest import run_cli
    from toolgym.agents.trajectory import write_jsonl

    said = " ".join(f"word{k}" for k in range(60)) + " " + "x" * 90  # and a word wider than 40
    played = Trajectory(id="t", env_id="toolgym/Maze-v0", steps=[
        Step(response_start=0, response_end=0, logprobs=[], action="go north",
             observation=[{"role": "tool", "name": "move", "content": said}], reward=0.0,
             state_key="s0", next_state_key="s1")])  # fmt: skip
    path = write_jsonl([played], tmp_path / "one.jsonl")
    shown = run_cli("rollouts", "show", str(path), env={"COLUMNS": "40"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    inside = "".join(line.strip("│ ") + " " for line in lines if line.startswith("│"))
    assert all(f"word{k} " in inside for k in range(60))  # every word kept, none cut off
    assert "x" * 30 in inside and inside.count("x") == 90  # the long word folds over lines
    assert max(len(line) for line in lines if line[:1] in "╭│╰") <= 40  # panels fit the width


def test_a_steps_figures_read_any_record_a_file_may_hold():
    from toolgym.training.run.step_figures import step_figures

    record = {"step": 3, "rollout/episodes": 64, "rollout/masked": 2, "rollout/success": 0.61,
              "rollout/success_low": 0.49, "rollout/success_high": 0.72,
              "rollout/valid_actions": 0.953, "signal/groups": 16,
              "signal/equal_groups": 4}  # fmt: skip
    assert step_figures(record) == (
        "64 episodes played (2 masked) · success 0.610 (95% 0.49 to 0.72) · valid calls 95.3% "
        "· 12 of 16 groups carried a signal"
    )
    odd = {"step": 3, "rollout/success": 0.5, "rollout/episodes": "many", "rollout/masked": [1],
           "rollout/success_low": None, "signal/groups": "x",
           "rollout/valid_actions": {}}  # fmt: skip
    assert step_figures(odd) == "success 0.500"
    assert step_figures({"step": 3}) is None and step_figures(None) is None
