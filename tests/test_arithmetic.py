"""Arithmetic-v0 and its calculator: correct answers, task sources, hostile expressions."""

from __future__ import annotations

import json

import pytest

import toolgym
from toolgym.envs.arithmetic import generate_task
from toolgym.envs.arithmetic.calculator import evaluate
from toolgym.errors import ConfigError
from toolgym.tools import ToolCall


def call(env, name, **arguments):
    return env.step(env.parser.render([ToolCall(name, arguments)]))


def test_generated_tasks_are_deterministic_and_correct():
    task = generate_task(4)
    assert task == generate_task(4)
    assert task["answer"] == eval(task["expression"])  # trusted, generated text
    assert task["question"] == f"What is {task['expression']}?"


def test_calculator_then_answer_scores_one():
    env = toolgym.make("toolgym/Arithmetic-v0")
    obs, info = env.reset(seed=2)
    expression = generate_task(2)["expression"]
    obs, reward, terminated, _, info = call(env, "calculator", expression=expression)
    assert obs[0]["content"] == str(generate_task(2)["answer"]) and reward == 0 and not terminated
    obs, reward, terminated, _, info = call(env, "answer", value=generate_task(2)["answer"])
    assert (obs[0]["content"], reward, terminated) == ("Correct.", 1.0, True)


def test_wrong_answer_ends_with_zero():
    env = toolgym.make("toolgym/Arithmetic-v0")
    env.reset(seed=2)
    obs, reward, terminated, *_ = call(env, "answer", value=-123456)
    assert (obs[0]["content"], reward, terminated) == ("Incorrect.", 0.0, True)


def test_tasks_from_jsonl_and_options(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        json.dumps({"question": "2+2?", "answer": 4})
        + "\n\n"
        + json.dumps({"question": "3*3?", "answer": 9})
        + "\n"
        + json.dumps({"question": "5-1?", "answer": 4, "split": "eval"})
        + "\n"
    )
    env = toolgym.make("toolgym/Arithmetic-v0", tasks=str(path))
    tasks = env.task_source()
    assert (tasks.size("train"), tasks.size("eval")) == (2, 1)
    # Without a task, the seed picks a training task, never the held-out one.
    seen = {env.reset(seed=s)[0][-1]["content"] for s in range(20)}
    assert seen == {"2+2?", "3*3?"}
    draw = tasks.draw("eval", 0)
    assert env.reset(seed=draw.seed, options={"task": draw.task})[0][-1]["content"] == "5-1?"
    assert call(env, "answer", value=4)[1] == 1.0
    env.reset(options={"task": {"question": "1+1?", "answer": 2}})
    assert call(env, "answer", value=2)[1] == 1.0
    with pytest.raises(
        ConfigError, match="needs 'question', 'answer'; 'question', 'answer' missing"
    ):
        env.reset(options={"task": {"q": "?"}})
    path.write_text("{not json}\n")
    with pytest.raises(ConfigError, match=r"tasks.jsonl:1: not valid JSON"):
        toolgym.make("toolgym/Arithmetic-v0", tasks=str(path))


@pytest.mark.parametrize(
    "expression,message",
    [
        ("__import__('os').system('id')", "is not allowed"),
        ("(1).__class__", "is not allowed"),
        ("True + True", "is not allowed"),
        ("9**9**9", "exponent"),
        ("1e300 * 1e300", "too large"),
        ("99999999999 ** 60", "too large"),
        ("1/0", "division by zero"),
        ("1 +", "syntax error"),
        ("1+" * 200 + "1", "longer than 200"),
    ],
)
def test_hostile_or_broken_expressions_are_refused_in_words(expression, message):
    with pytest.raises(ValueError, match=message):
        evaluate(expression)


def test_calculator_errors_reach_the_model_as_text():
    env = toolgym.make("toolgym/Arithmetic-v0")
    env.reset(seed=0)
    obs, reward, terminated, _, info = call(env, "calculator", expression="open('/etc/passwd')")
    assert obs[0]["content"].startswith(
        "Error: tool 'calculator': 'open('/etc/passwd')' is not allowed"
    )
    # the model's own mistake, not the calculator's bug
    assert not info["valid_action"] and not terminated
    assert info["tool_calls"][0]["error"] == "invalid_arguments"
