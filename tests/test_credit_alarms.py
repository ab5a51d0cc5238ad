"""The two credit alarms: a valid-call collapse told with its cause, and a proxy reward that
rises while success falls. Records worked by hand first, then a real run built to be gamed:
the quickstart's SFT policy paid +1 for every malformed call learns to make them, its calls
collapse and its success falls, and the run says both, with the reward that caused it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_ok
from toolgym.agents.trajectory import Step, Trajectory
from toolgym.training.rewards.agreement import agreement, agreement_metrics
from toolgym.training.run.advice import Advisor, Settings
from toolgym.training.run.credit_alarms import CallCollapse, GamedReward


def record(step, valid=0.95, success=0.5, **more):
    return {"step": step, "rollout/valid_actions": valid, "rollout/success": success,
            "rollout/episodes": 64, **more}  # fmt: skip


def test_a_collapse_is_told_once_with_the_update_that_pushed_valid_calls_down():
    alarm = CallCollapse(lr=5e-4)
    steady = [record(1, 0.95), record(2, 0.97), record(3, 0.94, **{"adv/valid_turns": -0.6})]
    assert [alarm.read(r) for r in steady] == [None, None, None]
    told = alarm.read(record(4, 0.60))
    assert told.startswith("step 4: valid calls collapsed from 97% (step 2) to 60%.")
    assert (
        "step 3's update pushed valid calls down as a whole (their turns' mean advantage -0.60"
        in told
    )
    assert "advantage.centre_turns" in told and "optim.lr (now 0.0005)" in told
    assert alarm.read(record(5, 0.40)) is None  # the same collapse, deeper: told once
    assert alarm.read(record(6, 0.90)) is None  # back near 97%: a new collapse is told again
    assert alarm.read(record(7, 0.50)).startswith("step 7: valid calls collapsed from 97% (step 2)")
    centred = CallCollapse(lr=5e-4, centred=True)  # a run centred already is not told to centre
    for r in [*steady, record(4, 0.60)]:
        told = centred.read(r)
    assert told and "Turns are centred already: try a lower optim.lr (now 0.0005)" in told
    assert "Try advantage.centre_turns" not in told


def test_a_collapse_names_the_reward_that_paid_malformed_calls_first():
    alarm = CallCollapse(lr=5e-4)
    paid = {"adv/invalid_turns": 2.0, "adv/valid_turns": -0.1, "proxy/judge/score": 0.4}
    alarm.read(record(1, 0.99, **paid))
    told = alarm.read(record(2, 0.5))
    assert "step 1's update paid malformed calls more than valid ones (their turns' mean " \
           "advantage +2.00 against -0.10), and the run has rewards besides the verified " \
           "outcome: judge" in told  # fmt: skip
    assert "Fix what the reward that prefers malformed calls pays" in told


def test_a_fall_within_the_noise_or_without_a_cause_is_told_as_such():
    alarm = CallCollapse(lr=5e-4)
    for step, valid in enumerate([0.9, 0.7, 0.8, 0.65], start=1):  # never 0.3 below the best
        assert alarm.read(record(step, valid)) is None
    held = CallCollapse(lr=5e-4)  # a held mini-batch's KL says what the step before it did
    held.read(record(1, 0.93, **{"train/approx_kl": 0.0, "train/approx_kl_max": 2.183}))
    assert "step 1's update moved the policy far (approx KL 2.183" in held.read(record(2, 0.19))
    last = CallCollapse(lr=5e-4)  # where the update's last step left the policy
    last.read(record(1, 0.99, **{"train/approx_kl": 0.001, "train/approx_kl_after": 0.8}))
    assert "step 1's update moved the policy far (approx KL 0.800" in last.read(record(2, 0.37))
    quiet = CallCollapse(lr=5e-4)
    quiet.read(record(1, 0.9, **{"adv/valid_turns": -0.05, "train/approx_kl": 0.01}))
    assert "No cause shows in the records" in quiet.read(record(2, 0.3))


def proxied(step, success, score, half=0.05):
    return record(step, success=success, **{"proxy/judge/score": score,
                  "proxy/judge/score_low": score - half, "proxy/judge/score_high": score + half})  # fmt: skip


def test_a_proxy_that_rises_while_success_falls_is_told_once():
    alarm = GamedReward(window=3)
    rows = [proxied(1, 0.5, 0.2), proxied(2, 0.55, 0.2), proxied(3, 0.5, 0.25),
            proxied(4, 0.3, 0.6), proxied(5, 0.2, 0.8), proxied(6, 0.1, 0.9)]  # fmt: skip
    told = [alarm.read(r) for r in rows]
    assert told[:5] == [[]] * 5
    (warning,) = told[5]
    assert warning.startswith(
        "step 6: reward 'judge' rose from 0.217 to 0.767 while success fell from 51.7% to 20.0% "
        "(steps 1-3 against 4-6): the policy may be gaming it."
    )
    assert alarm.read(proxied(7, 0.0, 1.0)) == []  # once per reward


@pytest.mark.parametrize(
    "later",
    [
        [(0.6, 0.6), (0.7, 0.8), (0.8, 0.9)],  # both rise: the proxy agrees
        [(0.3, 0.2), (0.2, 0.2), (0.1, 0.2)],  # success falls, the proxy stays
        [(0.49, 0.6), (0.5, 0.8), (0.47, 0.9)],  # the proxy rises, success within noise
    ],
)
def test_no_gaming_is_told_where_the_proxy_and_success_do_not_part(later):
    alarm = GamedReward(window=3)
    rows = [proxied(1, 0.5, 0.2), proxied(2, 0.5, 0.2), proxied(3, 0.5, 0.2)]
    rows += [proxied(4 + i, s, p) for i, (s, p) in enumerate(later)]
    assert all(alarm.read(r) == [] for r in rows)


def test_damaged_records_give_no_alarm_and_no_error():
    """What a resumed run replays from a damaged metrics.jsonl: wrong types, non-finite and
    out-of-range figures."""
    advisor = Advisor(Settings(steps=10, lr=5e-4, rollouts_per_task=4, run_dir="runs/x"))
    damaged = [
        {"step": 1, "rollout/valid_actions": "x", "rollout/success": None},
        {"step": 2, "rollout/valid_actions": float("nan"), "rollout/success": 0.5,
         "rollout/episodes": 0, "proxy/a/score": "bad"},
        {"step": 3, "rollout/success": 7.0, "rollout/episodes": -5, "proxy/a/score": 1e308,
         "proxy/a/score_low": -1e308, "proxy/a/score_high": 1e308},
        {"step": 4, "rollout/success": -1.0, "proxy/a/score": float("inf"), "proxy/": 1},
        {"step": 5, "rollout/success": 0.0, "proxy/a/score": 2.0},
        {"step": 6, "rollout/success": 0.0, "proxy/a/score": 3.0},
    ]  # fmt: skip
    for r in damaged:
        assert all(isinstance(w, str) for w in advisor.read(r))


def test_the_agreement_is_the_chance_a_solved_episode_outscores_a_failed_one():
    # solved 3, 2 against failed 1, 2: pairs 3>1, 3>2, 2>1, 2=2 (a half) -> 3.5 / 4 = 0.875.
    # Hanley-McNeil's variance, at the area pulled half a pair to 0.5 (4 / 5 = 0.8): q1 =
    # 0.8 / 1.2 = 0.66667, q2 = 2 * 0.64 / 1.8 = 0.71111; (0.16 + (q1 - 0.64) + (q2 - 0.64))
    # / 4 = 0.064444; half-width 1.96 * 0.25386 = 0.49756
    area, low, high = agreement([3, 2, 1, 2], [True, True, False, False])
    assert area == 0.875 and low == pytest.approx(0.3774, abs=1e-3) and high == 1.0
    one_pair = agreement([1.0, 0.0], [True, False])  # perfect, on one pair: a wide interval
    assert one_pair[0] == 1.0 and one_pair[1] < 0.2
    with pytest.raises(ValueError):
        agreement([1, 2], [True, True])


def test_each_proxy_logs_its_score_and_its_agreement_where_a_step_has_both_outcomes():
    def episode(solved, rewards):
        steps = [Step(0, 0, [], "a", [], 0.0, i, i + 1, rewards={"prm": r, "judge": 0.0})
                 for i, r in enumerate(rewards)]  # fmt: skip
        steps[-1].rewards["judge"] = 1.0 if solved else 0.0
        return Trajectory(id=str(len(rewards)), steps=steps, solved=solved)

    # the PRM scores a turn: its episode score is the mean, so a long failure (mean 0.1)
    # stays below a short success (0.5) though its sum (0.6) is higher
    kept = [episode(True, [0.5]), episode(False, [0.1] * 6)]
    out = agreement_metrics(kept, {"prm": "process", "judge": "outcome"})
    assert out["proxy/prm/agreement"] == 1.0 and out["proxy/judge/agreement"] == 1.0
    assert out["proxy/prm/score"] == pytest.approx(0.3) and out["proxy/judge/score"] == 0.5
    assert out["proxy/prm/score_low"] < 0.3 < out["proxy/prm/score_high"]
    every = agreement_metrics([episode(False, [0.1]), episode(False, [0.2])], {"prm": "process"})
    assert set(every) == {"proxy/prm/score", "proxy/prm/score_low", "proxy/prm/score_high"}
    assert agreement_metrics([], {"prm": "process"}) == {}
    huge = [episode(True, [1e308, 1e308]), episode(False, [1.0, 1.0])]  # sums past a float
    assert "proxy/judge/score" in agreement_metrics(huge, {"prm": "outcome", "judge": "outcome"})
    assert "proxy/prm/score" not in agreement_metrics(huge, {"prm": "outcome"})
    assert "proxy/prm/score" not in agreement_metrics(huge[:1] * 2, {"prm": "process"})


def test_the_advice_leaves_the_not_learning_hint_to_a_run_whose_calls_collapsed():
    advisor = Advisor(Settings(steps=40, lr=5e-4, rollouts_per_task=4, run_dir="runs/x"))
    told = []
    for step in range(1, 21):
        valid = 0.95 if step < 4 else 0.2
        told += advisor.read(record(step, valid, success=0.4 if step < 4 else 0.0))
    assert any("valid calls collapsed" in w for w in told)
    assert not any("not learning" in w for w in told)


GAMED = "[{source: env}, {source: format, kwargs: {invalid: 1.0}}]"
"""The env's reward and a format term built to be gamed: +1 for every malformed call."""


@pytest.mark.timeout(1500)  # the quickstart it starts from may be built first, in its setup
def test_a_run_paid_for_malformed_calls_is_told_its_calls_collapsed_and_its_reward_is_gamed(
    quickstart_run, tmp_path
):
    """Seeds 0, 1 and 2 of this run told the collapse at steps 5, 5 and 8 and the gaming at
    6, 7 and 9 of 12, each naming the reward that paid for malformed calls; seed 0 again
    once the recipe centred its turns, both at step 6 (centring takes no reward's pay
    away). (The
    quickstart's own run is no control: it can lose its calls for a step too, and is then
    told so.)"""
    quickstart, result = quickstart_run
    assert result.returncode == 0, "the quickstart, whose SFT policy this starts from, failed"
    run = tmp_path / "gamed"
    run_ok("train", "--config", "configs/maze_gigpo.yaml", f"model={quickstart / 'sft'}",
           f"run_dir={run}", "steps=12", f"rewards={GAMED}", "eval.every_steps=1000",
           "eval.at_start=false", "eval.episodes=8", "eval.plays=1", "eval.sets=[]",
           "rollout.tasks_per_step=8", "optim.micro_batch_size=8")  # fmt: skip
    log = (run / "train.log").read_text()
    collapse = next(line for line in log.splitlines() if "valid calls collapsed" in line)
    assert "paid malformed calls more than valid ones" in collapse
    assert "rewards besides the verified outcome: format" in collapse
    gamed = next(line for line in log.splitlines() if "reward 'format' rose" in line)
    assert "the policy may be gaming it" in gamed
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "rollout/success" in r]
    assert np.mean([r["rollout/valid_actions"] for r in steps[-3:]]) < 0.5
    assert all("proxy/format/score" in r for r in steps)
    assert not any("proxy/env" in key for r in steps for key in r)  # the verdict is no proxy
