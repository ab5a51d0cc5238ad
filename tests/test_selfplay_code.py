"""Code self-play on the real sandbox (bubblewrap): the proposer env runs a proposed program
twice and hands back its outputs; the execution stage refuses a program that uses `random`,
one that forks, one that never ends, one whose runs disagree and an input that is code;
CodeReason-v0 grades each kind (an abduction input and an induction program run in the
sandbox)."""

from __future__ import annotations

import asyncio

import pytest

import toolgym
from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.ref import EnvRef
from toolgym.training.selfplay.domains.code import CodeDomain
from toolgym.training.selfplay.validation import read_task, validate

pytestmark = pytest.mark.timeout(300)


def propose(program: str, inputs: list[str], kind: str = "deduction"):
    async def play():
        env = toolgym.make("toolgym/ProposeCode-v0", timeout_s=1.0)
        try:
            await env.areset(seed=0, options={"task": {"kind": kind}})
            action = f"<program>{program}</program>" + "".join(
                f"<input>{v}</input>" for v in inputs
            )
            _, _, done, _, info = await env.astep(action)
            return done, info["result"]
        finally:
            await env.aclose()

    return asyncio.run(play())


def verdict(result):
    step = Step(0, 1, [0.0], "x", [], 0.0, 0, 1, result=result)
    proposal = read_task(Trajectory("p0:0", steps=[step]))
    validate([proposal], CodeDomain(EnvRef("code", "toolgym/CodeReason-v0")).stages())
    return proposal.rejected


@pytest.mark.parametrize(
    ("kind", "program", "inputs", "reason"),
    [
        ("deduction", "def f(x):\n    return x", ["7"], "skill: the output is the input"),
        ("abduction", "def f(x):\n    return 1", ["5"], "skill: f gives the same output for other inputs"),
        ("abduction", "def f(x):\n    return len(x) > 100", ["'abc'"], "skill: f gives the same output"),
        ("induction", "def f(x):\n    return 0", ["1", "2", "3", "4"], "skill: every input gives one output"),
        ("induction", "def f(x):\n    return x", ["1", "2", "3", "4"], "skill: every output is its input"),
        ("abduction", "def f(x):\n    return x > 10", ["50"], None),  # 0 gives another output
        ("induction", "def f(x):\n    return x + 1", ["1", "2", "3", "4"], None),
    ],
)  # fmt: skip
def test_a_task_that_a_wrong_answer_passes_does_not_test_the_skill(kind, program, inputs, reason):
    """A copy of the input, any input, a constant or the identity program must not pass."""
    done, result = propose(program, inputs, kind)
    assert done
    found = verdict(result)
    assert found == reason if reason is None else found.startswith(reason), found


def solve(task, answer):
    async def play():
        env = toolgym.make("toolgym/CodeReason-v0")
        try:
            await env.areset(seed=0, options={"task": task})
            _, reward, done, _, _ = await env.astep(f"<answer>{answer}</answer>")
            return reward
        finally:
            await env.aclose()

    return asyncio.run(play())


def test_a_proposal_s_outputs_come_from_the_sandbox_and_solvers_are_graded_on_them():
    done, result = propose("def f(x):\n    return x * 3 + 1", ["4"])
    assert done and result["kind"] == "code.deduction" and result["check"]["outputs"] == ["13"]
    assert verdict(result) is None
    task = CodeDomain(EnvRef("code", "toolgym/CodeReason-v0")).solver_task(
        read_task(
            Trajectory("p", steps=[Step(0, 1, [0.0], "x", [], 0.0, 0, 1, result=result)])
        ).task
    )
    assert solve(task, "13") == 1.0 and solve(task, "14") == 0.0
    abduction = {**task, "kind": "abduction"}
    assert solve(abduction, "4") == 1.0 and solve(abduction, "5") == 0.0
    _, induced = propose("def f(x):\n    return x % 4", ["5", "6", "7", "9"], "induction")
    held_out = CodeDomain(EnvRef("c", "toolgym/CodeReason-v0")).solver_task(
        read_task(
            Trajectory("p", steps=[Step(0, 1, [0.0], "x", [], 0.0, 0, 1, result=induced)])
        ).task
    )
    assert (
        "f(7)" not in held_out["program"] and solve(held_out, "def f(x):\n    return x % 4") == 1.0
    )
    assert solve(held_out, "def f(x):\n    return 1") == 0.0  # right on f(5), wrong held out


@pytest.mark.parametrize(
    ("program", "inputs", "reason"),
    [
        ("import random\ndef f(x):\n    return random.random()", ["1"],
         "execution: the program uses a banned module: random"),
        ("import os\ndef f(x):\n    os.fork()\n    return x", ["1"],
         "execution: the program uses a banned module: os"),
        ("def f(x):\n    while True:\n        pass", ["1"], "execution: f(1) failed: timeout"),
        ("def f(x):\n    return x", ["__import__('os').getcwd()"],
         "execution: input \"__import__('os').getcwd()\": not a Python literal"),
        ("def g(x):\n    return x", ["1"], "execution: the program defines no function f"),
        ("def f(x):\n    return [0] * 10**4", ["1"],
         "execution: f(1) failed: the output has over 200 characters"),
        ("def f(x):\n    return hash(str(x)) % 1000", ["1"],
         "execution: the program uses a banned builtin: hash"),
        ("def f(x):\n    return id(object()) % 97", ["1"],
         "execution: the program uses a banned builtin: id"),
        # no name to refuse: a set of strings iterates in the order of their hashes, which a
        # fresh interpreter with another hash seed changes
        ("def f(x):\n    return ''.join({'alpha', 'beta', 'gamma', 'delta', x})", ["'eps'"],
         "execution: f('eps') gave"),
        ("def f(x):\n    return repr(object())[-6:]", ["1"], "execution: f(1) gave"),
    ],
)  # fmt: skip
def test_hostile_programs_are_rejected_with_their_reason(program, inputs, reason):
    done, result = propose(program, inputs)
    assert done
    assert verdict(result).startswith(reason)


def test_an_induction_answer_that_reaches_outside_is_wrong_unrun():
    task = {"kind": "induction", "program": "def f(x):\n    return x", "inputs": ["1", "2", "3", "4"],
            "outputs": ["1", "2", "3", "4"], "shown": 2}  # fmt: skip
    assert solve(task, "import os\ndef f(x):\n    return x") == 0.0
    assert solve(task, "def f(x):\n    return x") == 1.0
