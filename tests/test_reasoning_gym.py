"""reasoning-gym's datasets as task sources (their own package, generating here), graded by
their own scorers: single-turn, with a calculator and with a Python sandbox, several mixed by
weight, split so that eval never equals train, and a mixed run that trains."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

import toolgym
from conftest import run_ok
from toolgym.envs.reasoning_gym import ReasoningGymTasks
from toolgym.errors import ConfigError
from toolgym.tools import ToolCall

FIVE = ["leg_counting", "basic_arithmetic", "chain_sum", "word_sorting", "fraction_simplification"]


def answer(env, text):
    return env.step(env.parser.render([ToolCall("answer", {"text": text})]))


@pytest.mark.parametrize("dataset", FIVE)
def test_a_dataset_is_a_task_source_graded_by_its_scorer(dataset):
    env = toolgym.make("toolgym/ReasoningGym-v0", datasets=dataset)
    try:
        tasks = env.unwrapped.task_source()
        for draw in tasks.head("eval", 3):
            obs, _ = env.reset(seed=draw.seed, options={"task": draw.task})
            assert obs[-1]["content"] == draw.task["question"]
            _, reward, terminated, truncated, _ = answer(env, draw.task["answer"])
            assert (reward, terminated, truncated) == (1.0, True, False)
            env.reset(seed=draw.seed, options={"task": draw.task})
            assert answer(env, "certainly not this")[1] < 0.1  # some scorers give 0.01
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step("I think it is 12.")  # no <answer>
        assert (reward, terminated, info["valid_action"]) == (0.0, True, False)
    finally:
        env.close()


def test_splits_are_disjoint_by_content_and_the_same_in_every_instance():
    spec = "reasoning_gym:basic_arithmetic,chain_sum"
    first, second = ReasoningGymTasks(spec), ReasoningGymTasks(spec)
    train = [first.task("train", i)["question"] for i in range(400)]
    evals = [first.task("eval", i)["question"] for i in range(40)]
    assert not set(train) & set(evals)
    assert [second.task("eval", i)["question"] for i in range(40)] == evals
    other_seed = ReasoningGymTasks(spec, seed=1)
    assert [other_seed.task("eval", i)["question"] for i in range(40)] != evals


def test_datasets_mix_by_weight_and_take_their_own_settings():
    tasks = ReasoningGymTasks(
        {"reasoning_gym": {"leg_counting": {"weight": 3},
                           "basic_arithmetic": {"weight": 1, "min_terms": 2, "max_terms": 2}}}
    )  # fmt: skip
    drawn = [tasks.task("train", i) for i in range(400)]
    counts = Counter(t["dataset"] for t in drawn)
    assert 0.68 < counts["leg_counting"] / 400 < 0.82
    for t in drawn:
        if t["dataset"] == "basic_arithmetic":
            assert len(re.findall(r"-?\d+", t["question"])) == 2, t  # two terms
    for spec, words in [
        ("reasoning_gym:leg_countin", "no dataset 'leg_countin'. Did you mean: leg_counting?"),
        ({"reasoning_gym": {"basic_arithmetic": {"bogus": 1}}}, "refused its settings"),
        ({"reasoning_gym": {"chain_sum": {"weight": 0}}}, "weight must be positive"),
        ("reasoning_gym:", "names no dataset"),
    ]:
        with pytest.raises(ConfigError, match=words):
            ReasoningGymTasks(spec)


def test_answers_and_tasks_from_outside_are_bounded():
    tasks = ReasoningGymTasks("reasoning_gym:chain_sum")
    task = tasks.task("train", 0)
    assert tasks.score(task["answer"], task) == 1.0
    assert tasks.score(task["answer"] + " " * 5000, task) == 0.0
    for forged in [{**task, "index": task["index"] + 1}, {**task, "dataset": "leg_counting"},
                   {**task, "index": -1}]:  # fmt: skip
        with pytest.raises(ConfigError):
            tasks.score(task["answer"], forged)


def test_the_calculator_and_the_python_sandbox_envs_take_them():
    arithmetic = toolgym.make("toolgym/Arithmetic-v0", tasks="reasoning_gym:chain_sum")
    task = arithmetic.unwrapped.task_source().task("eval", 0)
    arithmetic.reset(options={"task": task})
    expression = task["question"].rsplit(":", 1)[1].strip(" =")
    obs, *_ = arithmetic.step(
        arithmetic.parser.render([ToolCall("calculator", {"expression": expression})])
    )
    value = float(obs[0]["content"])
    _, reward, terminated, *_ = arithmetic.step(
        arithmetic.parser.render([ToolCall("answer", {"value": value})])
    )
    assert (reward, terminated) == (1.0, True)
    arithmetic.close()

    math_code = toolgym.make("toolgym/MathCode-v0", tasks="reasoning_gym:basic_arithmetic")
    try:
        task = math_code.unwrapped.task_source().task("eval", 0)
        math_code.reset(options={"task": task})
        expression = task["question"].removeprefix("Calculate ").rstrip(".").replace("/", "//")
        obs, *_ = math_code.step(f"<python>print({expression})</python>")
        printed = obs[0]["content"].removeprefix("<output>").removesuffix("</output>").strip()
        _, reward, terminated, *_ = math_code.step(f"<answer>{printed}</answer>")
        assert printed == task["answer"] and (reward, terminated) == (1.0, True)
    finally:
        math_code.close()


def test_a_mixed_run_trains_two_steps(tiny_model_dir, tmp_path):
    mixture = "{leg_counting: {weight: 2}, chain_sum: {}, word_sorting: {}, basic_arithmetic: {}, fraction_simplification: {}}"
    run_ok("train", f"model={tiny_model_dir}", f"run_dir={tmp_path}", "steps=2",
           "env.id=toolgym/ReasoningGym-v0", f"env.kwargs.datasets={mixture}",
           "rollout.tasks_per_step=4", "rollout.rollouts_per_task=2", "rollout.max_tokens=16",
           "optim.micro_batch_size=8", "eval.every_steps=5", "eval.episodes=4")  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {r["step"] for r in rows if "train/loss" in r} == {1, 2}
    played = [json.loads(line) for line in (tmp_path / "rollouts" / "step_000001.jsonl").open()]
    assert played and {t["task"]["dataset"] for t in played} <= set(FIVE)


def test_without_the_extra_the_env_says_what_to_install():
    code = ("import sys; sys.modules['reasoning_gym'] = None\nimport toolgym\n"
            "toolgym.make('toolgym/ReasoningGym-v0')")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "pip install 'toolgym[reasoning]'" in result.stderr.splitlines()[-1]
