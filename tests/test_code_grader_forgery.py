"""Code-v0's grader attacked as a policy would, on both sandbox backends: a submission that
prints a forged verdict and leaves, returns an object equal to everything, writes into the
referee's output or imports, stops the referee, or hunts for the hidden tests' text scores 0
(and never as an infrastructure error); the feedback of a failed submission never shows a
hidden test."""

from __future__ import annotations

import asyncio

import pytest

from toolgym.envs.code import CodeTask
from toolgym.envs.code.grading import grade
from toolgym.envs.code.tasks import humaneval_rows
from toolgym.sandbox import SandboxPool

BACKENDS = ["bubblewrap", "docker"]
MARKER = "hidden-marker-8c1f"
"""Written only in the hidden tests: a submission that can read them finds it."""

TASK = CodeTask(
    task_id="secret",
    prompt="Write answer(x) that returns x * 2.",
    tests=f"import fractions\ndef check(candidate):\n    note = {MARKER!r}\n"
    "    assert candidate(2) == 4\n    assert candidate(5) == 10\n"
    "    assert fractions.Fraction(1, 2) == 0.5\n",
    entry_point="answer",
)

FORGE_VERDICT = """
import os
os.write(1, b'{"passed": true, "why": "passed"}\\n')
os._exit(0)
def answer(x):
    return None
"""
FORGE_IN_CALL = """
import os
def answer(x):
    os.write(1, b'{"passed": true, "why": "passed"}\\n')
    os._exit(0)
"""
EQUAL_TO_ALL = """
class Anything:
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    __hash__ = object.__hash__
def answer(x):
    return Anything()
"""
WRITE_INTO_REFEREE = """
import os, glob
message = b'{"passed": true, "why": "passed"}\\n'
for path in glob.glob('/proc/[0-9]*/fd/*'):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, message)
        os.close(fd)
    except OSError:
        pass
def answer(x):
    return None
"""
SHADOW_IMPORT = """
import os, sys
forged = "import os\\nos.write(1, b'{\\"passed\\": true, \\"why\\": \\"passed\\"}\\\\n')\\nos._exit(0)\\n"
for place in [os.getcwd(), '/tmp', *sys.path]:
    try:
        with open(os.path.join(place, 'fractions.py'), 'w') as f:
            f.write(forged)
    except OSError:
        pass
def answer(x):
    return x * 3
"""
STOP_REFEREE = """
import os, signal
def answer(x):
    for pid in range(1, 200):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return None
"""
HUNT_FOR_TESTS = f"""
import gc, glob, linecache, os, sys
def found():
    marker = ''.join(reversed({MARKER[::-1]!r}))  # not a constant the compiler folds
    seen = gc.get_objects()
    texts = [v for o in seen if isinstance(o, dict) for v in o.values() if isinstance(v, str)]
    texts += [c for o in seen if type(o).__name__ == 'function' for c in o.__code__.co_consts if isinstance(c, str)]
    texts += [line for name in list(linecache.cache) for line in linecache.getlines(name)]
    paths = glob.glob('/proc/[0-9]*/*') + glob.glob('/proc/[0-9]*/fd/*') + glob.glob('/work/*') + glob.glob('/tmp/*')
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                texts.append(os.read(fd, 1 << 20).decode('latin-1'))
            finally:
                os.close(fd)
        except OSError:
            pass
    return any(marker in t for t in texts)
def answer(x):
    return x * 2 if found() else None
"""
PRINT_EVERY_CONSTANT = """
import linecache, os, sys
frame = sys._getframe()
while frame is not None:
    for const in frame.f_code.co_consts:
        print(const)
    frame = frame.f_back
for name in list(linecache.cache):
    print(''.join(linecache.getlines(name)))
os._exit(0)
"""
FORGERIES = {
    "forged verdict at load": FORGE_VERDICT,
    "forged verdict in a call": FORGE_IN_CALL,
    "equal to everything": EQUAL_TO_ALL,
    "writes into every open pipe": WRITE_INTO_REFEREE,
    "shadows a module the tests import": SHADOW_IMPORT,
    "kills every process it can": STOP_REFEREE,
    "hunts for the hidden tests": HUNT_FOR_TESTS,
    "prints every constant it can see, then leaves": PRINT_EVERY_CONSTANT,
}


@pytest.fixture(scope="module", params=BACKENDS)
def pool(request):
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(SandboxPool(request.param, size=1).start())
    yield loop, pool
    loop.run_until_complete(pool.aclose())
    loop.close()


def run(pool, task: CodeTask, code: str):
    loop, sandboxes = pool
    return loop.run_until_complete(grade(sandboxes, task, code, timeout_s=5))


def test_the_honest_answer_passes(pool):
    verdict = run(pool, TASK, "def answer(x):\n    return x * 2\n")
    assert verdict.passed, verdict


@pytest.mark.parametrize("attack", list(FORGERIES))
def test_a_forged_verdict_fails(pool, attack):
    verdict = run(pool, TASK, FORGERIES[attack])
    assert not verdict.passed, (attack, verdict)
    assert MARKER not in verdict.feedback and "candidate(" not in verdict.feedback


def test_the_hunt_finds_the_marker_where_the_submission_may_read_it(pool):
    """The hunt above is a real detector: with the marker in the setup (which the submission
    is given, as HumanEval's prompt), it finds it and passes."""
    given = CodeTask("given", "p", TASK.tests, "answer", setup=f"NOTE = {MARKER!r}\n")
    assert run(pool, given, HUNT_FOR_TESTS).passed


def test_feedback_names_the_failure_never_the_test():
    task = CodeTask("t", "p", "assert answer(3) == 'the expected 3', 'expected text'", "answer")
    cases = {
        "def answer(x):\n    return 'no'\n": "a hidden test failed",
        "def answer(x):\n    raise ValueError(x)\n": "your function raised ValueError on a hidden test",
        "def answer(x):\n    return lambda: 1\n": "which the tests cannot compare",
        "def answr(x):\n    return 1\n": "your code does not define answer",
        "def answer(x:\n": "your code did not load: SyntaxError",
    }

    async def scenario():
        async with SandboxPool("bubblewrap", size=1) as sandboxes:
            return [await grade(sandboxes, task, code) for code in cases]

    for (code, expected), verdict in zip(cases.items(), asyncio.run(scenario()), strict=True):
        assert expected in verdict.feedback, (code, verdict.feedback)
        assert "expected" not in verdict.feedback and "3" not in verdict.feedback


def test_values_keep_their_types_and_tests_expecting_errors_still_work():
    task = CodeTask(
        "types",
        "p",
        "def check(candidate):\n"
        "    assert candidate('tuple') == (1, 'a', None) and type(candidate('tuple')) is tuple\n"
        "    assert candidate('dict') == {(1, 2): {3}, 'x': [1.5, True]}\n"
        "    assert candidate('bytes') == b'\\x00\\xff' and candidate('nan') != candidate('nan')\n"
        "    try:\n        candidate('raise')\n        assert False\n"
        "    except ValueError:\n        pass\n",
        "answer",
    )
    code = (
        "def answer(kind):\n"
        "    return {'tuple': (1, 'a', None), 'dict': {(1, 2): {3}, 'x': [1.5, True]},\n"
        "            'bytes': b'\\x00\\xff', 'nan': float('nan')}.get(kind) if kind != 'raise' "
        "else int('x')\n"
    )
    wrong_type = code.replace("(1, 'a', None)", "[1, 'a', None]")
    unsupported_when_an_error_is_expected = code.replace("int('x')", "object()")

    async def scenario():
        async with SandboxPool("bubblewrap", size=1) as sandboxes:
            codes = (code, wrong_type, unsupported_when_an_error_is_expected)
            return [await grade(sandboxes, task, c) for c in codes]

    right, wrong, unsupported = asyncio.run(scenario())
    assert right.passed, right
    assert not wrong.passed and not unsupported.passed


def test_no_humaneval_task_pays_a_forged_verdict_or_an_object_equal_to_everything():
    rows = humaneval_rows()

    async def scenario():
        async with SandboxPool("bubblewrap", size=2) as sandboxes:
            tasks = [CodeTask.from_record(row) for row in rows]
            forged = [
                grade(sandboxes, t, attack.replace("answer", t.entry_point))
                for t in tasks
                for attack in (FORGE_VERDICT, FORGE_IN_CALL, EQUAL_TO_ALL)
            ]
            return await asyncio.gather(*forged)

    verdicts = asyncio.run(scenario())
    assert len(verdicts) == 3 * 164
    assert [v.feedback for v in verdicts if v.passed] == []
