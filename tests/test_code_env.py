"""The code environments on real bubblewrap: every HumanEval canonical solution passes through
the env's grader and broken variants fail; multi-turn sessions; hostile submissions; sandbox
failures masked as infrastructure errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import toolgym
from toolgym.envs.code import CodeEnv, CodeTask, MathCodeEnv
from toolgym.envs.code.tasks import humaneval_rows
from toolgym.envs.resources import Resources
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall

PERTURB = """
def _wrong(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, (list, tuple)):
        return type(value)(list(value) + [None])
    return object()
"""


def broken_variants(task: CodeTask) -> dict[str, str]:
    """Two wrong versions of the canonical solution: one returns None, one returns a value
    near the right one (a bool flipped, a number off by one, a string or list one longer)."""
    assert task.solution is not None
    name = task.entry_point
    return {
        "none": f"{task.solution}\n\ndef {name}(*args, **kwargs):\n    return None\n",
        "near": f"{task.solution}\n{PERTURB}\n_right = {name}\n\n"
        f"def {name}(*args, **kwargs):\n    return _wrong(_right(*args, **kwargs))\n",
    }


async def submit_all(env: CodeEnv, rows, variant):
    rewards = {}
    for row in rows:
        await env.areset(seed=0, options={"task": row})
        code = variant(CodeTask.from_record(row))
        action = env.parser.render([ToolCall("submit", {"code": code})])
        _, reward, terminated, _, info = await env.astep(action)
        assert terminated and info["infra_error"] is None, info
        rewards[row["task_id"]] = reward
    return rewards


def test_humaneval_canonical_solutions_pass_and_broken_ones_fail():
    rows = humaneval_rows()
    assert len(rows) == 164

    async def scenario():
        env = CodeEnv(pool_size=2)
        try:
            right = await submit_all(env, rows, lambda t: t.solution)
            none = await submit_all(env, rows, lambda t: broken_variants(t)["none"])
            near = await submit_all(env, rows, lambda t: broken_variants(t)["near"])
        finally:
            await env.aclose()
        return right, none, near

    right, none, near = asyncio.run(scenario())
    assert [k for k, r in right.items() if r != 1.0] == []
    assert [k for k, r in none.items() if r != 0.0] == []
    assert [k for k, r in near.items() if r != 0.0] == []


def call(env, name: str, **arguments) -> str:
    return env.parser.render([ToolCall(name, arguments)])


ADD_TASK = {
    "task_id": "add",
    "prompt": "Write add(a, b) that returns a + b.",
    "tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
    "entry_point": "add",
}


def play(env, seed, options, actions):
    async def scenario():
        try:
            obs, _ = await env.areset(seed=seed, options=options)
            steps = []
            for action in actions:
                steps.append(await env.astep(action))
                if steps[-1][2] or steps[-1][3]:
                    break
            return obs, steps
        finally:
            await env.aclose()

    return asyncio.run(scenario())


def test_multi_turn_run_read_fix_submit(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(ADD_TASK) + "\n")
    env = toolgym.make("toolgym/Code-v0", tasks=str(tasks), max_submissions=2, max_turns=5)
    obs, steps = play(env, 0, {"task": ADD_TASK}, [
        call(env, "run_python", code="def add(a, b):\n    return a - b\nadd(1, 2)"),
        call(env, "run_python", code="add(5, 5)"),  # the definition persists in the session
        call(env, "submit", code="def add(a, b):\n    return a - b"),
        call(env, "submit", code="def add(a, b):\n    return a + b"),
    ])  # fmt: skip
    assert "Write add(a, b)" in obs[-1]["content"]
    first, second, failed, passed = steps
    assert first[0][0]["content"] == "-1\n[4 turns left]"
    assert second[0][0]["content"].startswith("0\n")
    assert "Tests failed: a hidden test failed\n" in failed[0][0]["content"]
    assert "[1 submission(s) left]" in failed[0][0]["content"] and not failed[2]
    assert passed[0][0]["content"] == "All tests passed." and passed[1:3] == (1.0, True)


@pytest.mark.parametrize(
    "code",
    [
        "def add(a, b):\n    return a + b\nimport sys\nsys.exit(0)",  # leaves before the tests
        "def add(a, b):\n    return a + b\nimport os\nos._exit(0)",
        "import os\nwhile True:\n    os.fork()",
        "while True:\n    pass",
        "print('x' * 10**7)",
        "x = bytearray(2**34)",
        "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)",
    ],
)
def test_hostile_submissions_score_zero_without_infra_errors(code):
    env = CodeEnv(tasks=[ADD_TASK], timeout_s=2, memory_mb=256)
    _, steps = play(env, 0, {"task": ADD_TASK}, [call(env, "submit", code=code)])
    _, reward, terminated, _, info = steps[0]
    assert (reward, terminated, info["infra_error"]) == (0.0, True, None)


def test_a_missing_sandbox_is_an_infra_error_not_a_zero(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # bwrap cannot be found
    env = CodeEnv(tasks=[ADD_TASK])
    _, steps = play(env, 0, {"task": ADD_TASK}, [call(env, "submit", code="def add(a, b): pass")])
    _, reward, terminated, _, info = steps[0]
    assert info["infra_error"] and "bwrap" in info["infra_error"]
    assert not terminated and reward == 0.0


def test_math_with_code_scripted_and_by_hand():
    problem = {"question": "What is 37 * 24 + 5?", "answer": 893}
    env = MathCodeEnv()
    _, steps = play(env, 0, {"task": problem}, [
        "<think>code</think><python>x = 37 * 24</python>",
        "<python>print(x + 5)</python>",
        "<python>while True: pass</python>",
        "<answer> 893 </answer>",
    ])  # fmt: skip
    assert steps[0][0][0]["content"] == "<output>[no output]</output>"
    assert steps[1][0][0]["content"] == "<output>893</output>"
    assert "time limit" in steps[2][0][0]["content"] and steps[2][4]["infra_error"] is None
    assert steps[3][1:3] == (1.0, True)


def test_finished_episodes_hold_no_sandbox_session_while_their_envs_sit_idle():
    """A pool opens at most 64 sessions at once. Envs whose episodes are over, left idle
    (as a runtime's env pool leaves them until their next reset), must not hold theirs: the
    65th env's first call runs at once instead of waiting out the tool's time limit."""
    problem = {"task": {"question": "What is 2 + 3?", "answer": 5}}

    async def scenario():
        shared = Resources()
        envs = [MathCodeEnv() for _ in range(65)]
        for env in envs:
            env.use_resources(shared)
        try:
            for env in envs[:64]:
                await env.areset(seed=0, options=problem)
                await env.astep("<python>print(2 + 3)</python>")
                *_, terminated, _, _ = await env.astep("<answer>5</answer>")
                assert terminated
            await envs[64].areset(seed=0, options=problem)
            started = time.monotonic()
            obs, *_ = await asyncio.wait_for(envs[64].astep("<python>print(2 + 3)</python>"), 60)
            return obs, time.monotonic() - started
        finally:
            for env in envs:
                await env.aclose()
            await shared.aclose()

    obs, seconds = asyncio.run(scenario())
    assert obs[0]["content"] == "<output>5</output>" and seconds < 10, (obs, seconds)


@pytest.mark.parametrize(("text", "right"), [("6,912", True), ("6912.", True), ("6913", False),
                                             ("six", False), ("nan", False), ("1e400", False)])  # fmt: skip
def test_math_answers_are_compared_as_numbers(text, right):
    env = MathCodeEnv()
    _, steps = play(
        env, 0, {"task": {"question": "q", "answer": 6912}}, [f"<answer>{text}</answer>"]
    )
    assert steps[0][1] == (1.0 if right else 0.0)


def test_math_scripted_solver_solves_generated_problems():
    async def scenario():
        env = MathCodeEnv()
        solved = 0
        try:
            for seed in range(20):
                await env.areset(seed=seed, options={"task": {"seed": seed}})
                done, reward = False, 0.0
                while not done:
                    _, reward, terminated, truncated, _ = await env.astep(env.scripted_action())
                    done = terminated or truncated
                solved += reward == 1.0
        finally:
            await env.aclose()
        return solved

    assert asyncio.run(scenario()) == 20


def test_math_problems_of_chosen_shapes_and_the_default_draws_of_before():
    """`templates` picks the problem shapes (a run can hold one out as a transfer set); all
    six, the default, draw the problems they drew before shapes had names."""
    from toolgym.envs.code.math_problems import TEMPLATES, generate_problem

    assert [generate_problem(s)["expression"] for s in range(3)] == [
        "65 + 17 - 35", "84 * 20 - 263", "23 * 22 + 371"]  # fmt: skip
    assert generate_problem(5, tuple(TEMPLATES)) == generate_problem(5)
    assert {tuple(generate_problem(s, ("trees",))["expression"].split()[1:4:2]) for s in range(20)} == {
        ("*", "-")}  # fmt: skip
    env = MathCodeEnv(templates=["trees"])
    assert all("trees are cut down" in env._generate(s)["question"] for s in range(10))
    with pytest.raises(ConfigError, match="unknown problem templates"):
        MathCodeEnv(templates=["forests"])
    for hostile in ("trees", [], {"trees": 1}):
        with pytest.raises(ConfigError, match="list of names"):
            MathCodeEnv(templates=hostile)
    with pytest.raises(ConfigError, match="unknown problem templates"):
        MathCodeEnv(templates=[["trees"]])
