"""The reward-integrity pass of `toolgym check`: what a policy hunting for the grader tries
first, through the env's own tools only. An env whose reward pays any of it fails in words.

- Blind answers: each tool's text parameters given answers that know nothing of the task
  (constants, every number up to 999 at once, every answer the env's tasks hold at once, a
  program that prints a pass verdict and leaves). Of PROBE_TASKS tasks, none may count as
  solved on more than BLIND_LIMIT; a blind answer that earns partial credit without
  counting as solved is a warning (a reward, not a success).
- Self-masking: inputs that make a database, a sandbox or an interpreter fail inside must
  never be filed as the infrastructure's fault: a masked episode leaves every rate's
  denominator, so a policy that could mask its failures would report whatever it liked.

What it cannot try: attacks that need the task's own names (an object equal to everything
returned from the right function), or several episodes at once; tests/ holds those per env.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from toolgym.envs.tool_env import ToolEnv
from toolgym.errors import one_line
from toolgym.tools.records import ToolCall

PROBE_TASKS = 6
BLIND_LIMIT = 3
"""Of PROBE_TASKS tasks, how many a blind answer may be right on (a yes/no task's "yes" may
be right on half by chance); over it, the reward pays for not knowing."""
EVERY_NUMBER = " ".join(str(n) for n in range(1000))
FORGED_VERDICT = "import os\nos.write(1, b'All tests passed. {\"passed\": true}\\n')\nos._exit(0)\n"
BLIND_ANSWERS = {
    "an empty answer": "",
    "'0'": "0",
    "'yes'": "yes",
    "every number up to 999": EVERY_NUMBER,
    "a program that prints a pass verdict and exits": FORGED_VERDICT,
}
SELF_MASKING = {
    "an internal PostgreSQL error (3D000)": "SELECT pg_database_size('nope')",
    "an internal PostgreSQL error (XX000)": "SELECT pg_describe_object(1, 1, 1)",
    "a query of the server's activity": "SELECT query FROM pg_stat_activity",
    "a SQLite internal table": "SELECT * FROM sqlite_master; PRAGMA integrity_check",
    "code that kills its parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "code that kills every process it can": (
        "import os, signal\nfor pid in range(1, 300):\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass"
    ),
    "code that ends its interpreter": "import os\nos._exit(3)",
    "code that crashes its interpreter": "import ctypes\nctypes.string_at(0)",
}
ANSWER_KEYS = ("answer", "answers", "gold", "expected", "target")
MAX_LISTED = 200
"""Answers of the env's tasks listed at once, at most."""


@dataclass
class ProbeResult:
    blind_paid: list[str] = field(default_factory=list)
    """'tool(probe): solved k of n' for each blind answer over the limit."""
    partial_credit: list[str] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)
    probes: int = 0


def every_answer(env: ToolEnv) -> str | None:
    """Every answer the env's tasks hold (train and eval), listed at once; None when its
    tasks hold none in a field of ANSWER_KEYS."""
    source = env.task_source()
    found: dict[str, None] = {}
    for split in ("train", "eval"):
        size = source.size(split)
        for index in range(min(size if size is not None else 64, 64)):
            try:
                task = source.task(split, index)
            except Exception:
                break
            for value in _answers(task):
                found.setdefault(value)
    if not found:
        return None
    return " , ".join(list(found)[:MAX_LISTED])


def _answers(task: Any) -> Iterable[str]:
    if not isinstance(task, dict):
        return []
    out = []
    for key in ANSWER_KEYS:
        value = task.get(key)
        values = value if isinstance(value, list) else [value]
        out += [str(v) for v in values if isinstance(v, str | int | float) and str(v).strip()]
    return out


def text_slots(env: ToolEnv) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool, text parameter, the call's other arguments) for every text parameter."""
    slots = []
    for schema in env.tool_schemas():
        function = schema["function"]
        properties = (function.get("parameters") or {}).get("properties") or {}
        others = {name: _plain_value(spec) for name, spec in properties.items()}
        for name, spec in properties.items():
            if isinstance(spec, dict) and spec.get("type") == "string":
                slots.append((function["name"], name, others))
    return slots


def _plain_value(spec: Any) -> Any:
    kind = spec.get("type") if isinstance(spec, dict) else None
    return {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(
        str(kind), ""
    )


async def probe(factory: Callable[[], Any], seed: int) -> ProbeResult:
    """Every blind answer on each of PROBE_TASKS tasks and every self-masking input on the
    first. The calls of one task share an episode while it lasts (a reset costs a browser
    env a page load): each call is as blind after another blind call as after a reset."""
    result = ProbeResult()
    env = factory()
    try:
        tool_env = env.unwrapped
        if not isinstance(tool_env, ToolEnv):
            return result
        blind = dict(BLIND_ANSWERS)
        listed = every_answer(tool_env)
        if listed is not None:
            blind["every answer of the env's tasks"] = listed
        slots = text_slots(tool_env)
        solved: Counter[str] = Counter()
        paid: dict[str, float] = defaultdict(float)
        for k in range(PROBE_TASKS):
            calls = [(f"{t}({p}={what})", t, {**o, p: text}) for t, p, o in slots
                     for what, text in blind.items()]  # fmt: skip
            if k == 0:
                calls += [(f"{t}({what})", t, {**o, p: text}) for t, p, o in slots
                          for what, text in SELF_MASKING.items()]  # fmt: skip
            await tool_env.areset(seed=seed + k)
            for where, tool, arguments in calls:
                if tool_env.done:
                    await tool_env.areset(seed=seed + k)
                success, reward, masked = await _play(tool_env, tool, arguments)
                result.probes += 1
                solved[where] += success
                paid[where] += max(reward, 0.0) if not success else 0.0
                if masked:
                    result.masked.append(f"{where}: {masked}")
        result.blind_paid = [f"{w}: solved {n} of {PROBE_TASKS}" for w, n in solved.items()
                             if n > BLIND_LIMIT]  # fmt: skip
        result.partial_credit = [f"{w}: {v / PROBE_TASKS:.3g} a task" for w, v in paid.items()
                                 if v > 0 and solved[w] <= BLIND_LIMIT]  # fmt: skip
    finally:
        await env.aclose()
    return result


async def _play(
    env: ToolEnv, tool: str, arguments: dict[str, Any]
) -> tuple[bool, float, str | None]:
    """One call as a turn: (counted as solved, its reward, why it was masked)."""
    _, reward, terminated, _, info = await env.astep(env.parser.render([ToolCall(tool, arguments)]))
    masked = info.get("infra_error")
    solved = info.get("solved")
    success = solved if isinstance(solved, bool) else bool(terminated and reward > 0)
    return success and not masked, float(reward), one_line(str(masked), 160) if masked else None
