"""`toolgym check`: does an env honour the contract? Findings in plain words, not tracebacks.

Checks, in order: the env builds; it is a toolgym Env with spaces; reset and step return the
right shapes with every info key and a hashable state_key; a seeded reset is deterministic;
its task source has training tasks and keeps eval tasks apart from them, and a reset with a
task (on an instance that already played) starts exactly as the first reset did; eval draws
do not open as train draws do, or the env says why (held-out items: a warning either way,
which the contract test fails for a shipped env that does not say why), and a held-out split
of few items says so; malformed turns become observations instead of exceptions; tool schemas are valid; each tool
answers odd inputs its schema allows (an empty text, a bound of a number) without raising; scripted
(or random) episodes end properly; Gymnasium's own `check_env` passes; close is idempotent.
Later checks are skipped once the env cannot even reset or step.
"""

from __future__ import annotations

import asyncio
import json
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from toolgym.envs.core import INFO_KEYS, RESULT_LIMIT, Env
from toolgym.envs.resources import Resources
from toolgym.envs.reward_probes import probe
from toolgym.envs.spaces import message_problem
from toolgym.envs.tasks import TaskSource, content_key
from toolgym.envs.tasks.held_out import shared_share, split_items
from toolgym.envs.tool_env import ToolEnv
from toolgym.errors import one_line
from toolgym.tools.records import ToolCall

MALFORMED_TURNS = {
    "plain text without a tool call": "I think I should look around first.",
    "invalid JSON in a tool call": '<tool_call>{"name": "x", "arguments": {"a": 1,}}</tool_call>',
    "an unknown tool": '<tool_call>{"name": "no_such_tool_xyz", "arguments": {}}</tool_call>',
    "an unclosed tool call": '<tool_call>{"name": "x"',
}
MAX_EPISODE_STEPS = 500
ODD_SETS = 3
"""Odd inputs each tool is called with (one value per parameter in each)."""
ITEM_DRAWS = {"train": 256, "eval": 64}
"""Draws of each split whose opening observations the held-out check compares."""
ITEM_CHECK_S = 10.0
"""The held-out check stops drawing after this long (envs with a browser reset slowly)."""
MAX_LEAK = 0.02
"""The share of eval items that training may also draw before the check warns (showing the
reason, where the env says why in `shared_items`)."""


class CheckFailed(Exception):
    """One check's failure, carrying the plain-words explanation."""


@dataclass
class Finding:
    check: str
    status: str  # "pass", "fail", "warn" or "skip"
    message: str = ""


class Passed(str):
    """What a check returns when it passed with figures worth printing (a plain string it
    returns is a warning)."""


@dataclass
class CheckReport:
    env_id: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.status != "fail" for f in self.findings)

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "fail"]


def check_env(
    target: str | Callable[[], Any],
    *,
    seed: int = 0,
    episodes: int = 3,
    kwargs: dict[str, Any] | None = None,
) -> CheckReport:
    """Check the env registered as `target` (an id, built with `kwargs`) or built by
    `target()` (a factory)."""
    from toolgym.envs.registration import make

    name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
    factory: Callable[[], Any] = (
        (lambda: make(target, **(kwargs or {}))) if isinstance(target, str) else target
    )
    report = CheckReport(name)
    checks = _Checks(factory, report, seed, episodes)
    checks.run()
    return report


class _Checks:
    def __init__(
        self, factory: Callable[[], Any], report: CheckReport, seed: int, episodes: int
    ) -> None:
        self.factory, self.report, self.seed, self.episodes = factory, report, seed, episodes

    def record(self, check: str, fn: Callable[[], str | None]) -> bool:
        try:
            note = fn()
        except CheckFailed as exc:
            self.report.findings.append(Finding(check, "fail", str(exc)))
            return False
        except Exception as exc:
            self.report.findings.append(
                Finding(check, "fail", f"raised {type(exc).__name__}: {exc}")
            )
            return False
        passed = note is None or isinstance(note, Passed)
        self.report.findings.append(Finding(check, "pass" if passed else "warn", note or ""))
        return True

    def skip(self, *checks: str) -> None:
        for check in checks:
            self.report.findings.append(Finding(check, "skip", "fix the failures above first"))

    def run(self) -> None:
        """The checks in order, on one event loop with one set of shared resources (a
        browser, a server process), as the instances of a run share the runtime's, so each
        check's fresh instance does not start its own; the sync API's checks run their envs
        on that loop too (the resources live there)."""
        with asyncio.Runner() as runner:
            resources = Resources(loop=runner.get_loop())
            try:
                self._run_checks(runner, self._sharing(resources))
            finally:
                runner.run(resources.aclose())

    def _sharing(self, resources: Resources) -> Callable[[], Any]:
        def make() -> Any:
            env = self.factory()
            if isinstance(env, gymnasium.Env) and isinstance(env.unwrapped, Env):
                env.unwrapped.use_resources(resources)
            return env

        return make

    def _run_checks(self, runner: asyncio.Runner, shared: Callable[[], Any]) -> None:
        env: Any = None

        def build() -> None:
            nonlocal env
            try:
                env = shared()
            except Exception as exc:
                raise CheckFailed(f"could not build the env: {exc}") from None

        later = (
            "contract",
            "determinism",
            "tasks",
            "held-out items",
            "malformed turns",
            "tool schemas",
            "odd tool inputs",
            "episodes",
            "reward integrity",
            "gymnasium check_env",
            "close",
        )
        if not self.record("build", build) or not self.record(
            "class and spaces", lambda: _class_and_spaces(env)
        ):
            self.skip(*later)
            return
        if not self.record("contract", lambda: runner.run(_contract(env, self.seed))):
            self.skip(*later[1:])
            return
        self.record("determinism", lambda: runner.run(_determinism(shared, self.seed)))
        self.record("tasks", lambda: runner.run(_tasks(shared)))
        self.record("held-out items", lambda: runner.run(_held_out_items(shared)))
        self.record("malformed turns", lambda: runner.run(_malformed(shared, self.seed)))
        self.record("tool schemas", lambda: _tool_schemas(env))
        self.record("odd tool inputs", lambda: runner.run(_odd_inputs(shared, self.seed)))
        self.record("episodes", lambda: runner.run(_episodes(shared, self.seed, self.episodes)))
        self.record("reward integrity", lambda: runner.run(_reward_integrity(shared, self.seed)))
        self.record("gymnasium check_env", lambda: _gymnasium(shared))
        self.record("close", lambda: _close_twice(shared))


def _class_and_spaces(env: Any) -> str | None:
    if not isinstance(env, Env):
        raise CheckFailed(
            f"{type(env).__name__} is not a toolgym Env; subclass toolgym.Env (or toolgym.ToolEnv) "
            "so it has async areset/astep and chat-message observations"
        )
    for attr in ("observation_space", "action_space"):
        if not isinstance(getattr(env, attr, None), gymnasium.spaces.Space):
            raise CheckFailed(
                f"{attr} must be a gymnasium Space (the base class provides permissive ones)"
            )
    return None


async def _contract(env: Env, seed: int) -> str | None:
    try:
        returned = await env.areset(seed=seed)
        _check_reset(returned)
        action = env.scripted_action() or env.action_space.sample()
        _check_step(await env.astep(action))
    finally:
        await env.aclose()
    return None


def _check_reset(returned: Any) -> None:
    if not isinstance(returned, tuple) or len(returned) != 2:
        raise CheckFailed(
            f"reset() must return a pair (observation, info); it returned {_shape(returned)}"
        )
    obs, info = returned
    _check_messages(obs, "reset()")
    _check_info(info, "reset()")


def _check_step(returned: Any) -> None:
    if not isinstance(returned, tuple) or len(returned) != 5:
        hint = (
            " (the old Gym API returned 4 values with one `done`; split it into terminated and truncated)"
            if isinstance(returned, tuple) and len(returned) == 4
            else ""
        )
        raise CheckFailed(
            f"step() must return 5 values (observation, reward, terminated, truncated, info); "
            f"it returned {_shape(returned)}{hint}"
        )
    obs, reward, terminated, truncated, info = returned
    _check_messages(obs, "step()")
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise CheckFailed(
            f"step()'s reward must be a number, got {type(reward).__name__} {reward!r}"
        )
    for name, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, bool):
            raise CheckFailed(
                f"step()'s {name} must be a bool, got {type(value).__name__} {value!r}"
            )
    _check_info(info, "step()")


def _check_messages(obs: Any, where: str) -> None:
    if not isinstance(obs, list):
        raise CheckFailed(
            f"{where}'s observation must be a list of chat messages, got {type(obs).__name__}"
        )
    for i, message in enumerate(obs):
        problem = message_problem(message)
        if problem:
            raise CheckFailed(f"{where}'s observation, message {i}: {problem}")


def _check_info(info: Any, where: str) -> None:
    if not isinstance(info, dict):
        raise CheckFailed(f"{where}'s info must be a dict, got {type(info).__name__}")
    missing = [k for k in INFO_KEYS if k not in info]
    if missing:
        raise CheckFailed(
            f"{where}'s info lacks {', '.join(repr(k) for k in missing)} (use toolgym.envs.make_info)"
        )
    try:
        hash(info["state_key"])
    except TypeError:
        raise CheckFailed(
            f"{where}'s info['state_key'] is a {type(info['state_key']).__name__}, which is not hashable; "
            "GiGPO groups steps by it, so use a string or a tuple"
        ) from None
    for key, fits, wanted in INFO_TYPES:
        if key in info and not fits(info[key]):
            got = type(info[key]).__name__
            raise CheckFailed(f"{where}'s info[{key!r}] is a {got}; the rollout reads {wanted}")
    if info.get("result") is not None:
        try:
            size = len(json.dumps(info["result"], allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise CheckFailed(f"{where}'s info['result'] is not JSON data: {exc}") from None
        if size > RESULT_LIMIT:
            raise CheckFailed(f"{where}'s info['result'] takes {size} characters as JSON "
                              f"(at most {RESULT_LIMIT})")  # fmt: skip


def _is_list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


INFO_TYPES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("valid_action", lambda v: isinstance(v, bool), "a bool"),
    ("tool_calls", _is_list_of_dicts, "a list of dicts (id, name, arguments, error)"),
    ("error", lambda v: v is None or isinstance(v, str), "text or None"),
    ("infra_error", lambda v: v is None or isinstance(v, str), "text or None"),
    ("tools", lambda v: v is None or _is_list_of_dicts(v), "a list of tool schemas"),
    ("solved", lambda v: isinstance(v, bool), "a bool (the env's verdict of success)"),
)
"""What each key of the info contract (envs/core.py) must hold, where the env gives it."""


async def _determinism(factory: Callable[[], Any], seed: int) -> str | None:
    env = factory()
    try:
        first_obs, first_info = await env.areset(seed=seed)
        second_obs, second_info = await env.areset(seed=seed)
    finally:
        await env.aclose()
    if first_obs != second_obs:
        raise CheckFailed(
            f"reset(seed={seed}) gave different observations twice; the same seed must give the same start"
        )
    if first_info["state_key"] != second_info["state_key"]:
        raise CheckFailed(f"reset(seed={seed}) gave different state_keys twice")
    return None


async def _tasks(factory: Callable[[], Any]) -> str | None:
    env = factory()
    try:
        source = env.task_source()
        if not isinstance(source, TaskSource):
            raise CheckFailed(
                f"task_source() returned a {type(source).__name__}, not a TaskSource (SeedTasks, "
                "ContentTasks, ListTasks or a subclass, envs/tasks/__init__.py)"
            )
        train, held = source.head("train", 8), source.head("eval", 8)
        if not train:
            raise CheckFailed("the task source has no training tasks")
        shared = {content_key(d.task) for d in train} & {content_key(d.task) for d in held}
        if shared:
            raise CheckFailed(
                "a task is in both the train and the eval split: evaluation would measure training tasks"
            )
        draw = train[0]
        first = await env.areset(seed=draw.seed, options={"task": draw.task})
        for _ in range(3):  # play a little, so the instance carries an episode's state
            step = await env.astep(env.scripted_action() or "I am not sure yet.")
            if step[2] or step[3]:
                break
        again = await env.areset(seed=draw.seed, options={"task": draw.task})
    finally:
        await env.aclose()
    if first[0] != again[0] or first[1]["state_key"] != again[1]["state_key"]:
        raise CheckFailed(
            "reset with the same task and seed on an instance that already played started "
            "differently from its first reset; instances are reused, so reset must not carry "
            "anything over from the episode before"
        )
    return None if held else "no eval tasks: evaluation will have nothing to play"


async def _held_out_items(factory: Callable[[], Any]) -> str | None:
    """Eval items (what the policy sees at reset) that training draws too: where a generator
    has few distinct items, seeds apart are not items apart, and held-out success measures
    training items. A held-out split of few items says so: its rates have wide intervals."""
    env = factory()
    until = asyncio.get_running_loop().time() + ITEM_CHECK_S
    try:
        source = env.task_source()
        train, held = await split_items(env, ITEM_DRAWS["train"], ITEM_DRAWS["eval"], until, source)
        held_size = source.size("eval")  # known once a held-out split ran out
    finally:
        await env.aclose()
    shared = shared_share(held, train)
    if held and shared > MAX_LEAK:
        leak = (
            f"{shared:.0%} of {len(held)} eval draws ({len(set(held))} distinct items) open "
            f"exactly as one of {len(train)} train draws ({len(set(train))} distinct items): "
            "held-out results would measure training items"
        )
        declared = type(env.unwrapped).shared_items
        if declared:
            return f"{leak} (declared: {declared})"
        return (
            f"{leak}; split the tasks by content (envs/tasks/content.py, or a task list, "
            "which splits by content), or say why they are shared in the env's `shared_items`"
        )
    if held_size is not None and 0 < held_size < ITEM_DRAWS["eval"]:
        return (
            f"the eval split holds {held_size} distinct items ({len(set(train))} distinct in "
            f"{len(train)} train draws): too few for a tight held-out rate; settings with more "
            "distinct items (a larger space) hold more out"
        )
    if not held:
        return None  # no eval tasks at all: the tasks check says so
    sizes = f" (the eval split holds {held_size})" if held_size is not None else ""
    return Passed(
        f"{len(set(held))} distinct items in {len(held)} eval draws{sizes}, "
        f"{len(set(train))} in {len(train)} train draws; {shared:.0%} of the eval draws open "
        "as a train draw does"
    )


async def _malformed(factory: Callable[[], Any], seed: int) -> str | None:
    for what, text in MALFORMED_TURNS.items():
        env = factory()
        try:
            await env.areset(seed=seed)
            try:
                returned = await env.astep(text)
            except Exception as exc:
                raise CheckFailed(
                    f"a turn with {what} raised {type(exc).__name__}: {exc}; a model's malformed turn must "
                    "come back as an observation it can read"
                ) from None
            _check_step(returned)
            if what != "plain text without a tool call" and returned[4]["valid_action"]:
                raise CheckFailed(f"a turn with {what} was reported as valid_action=True")
        finally:
            await env.aclose()
    return None


def _tool_schemas(env: Env) -> str | None:
    schemas = env.tool_schemas() if hasattr(env, "tool_schemas") else None
    if schemas is None:
        return "no tool_schemas(): nothing to check (fine for envs without tools)"
    for s in schemas:
        fn = s.get("function", {}) if isinstance(s, dict) else {}
        if (
            s.get("type") != "function"
            or not fn.get("name")
            or fn.get("parameters", {}).get("type") != "object"
        ):
            raise CheckFailed(
                f"tool schema {json.dumps(s, default=str)[:200]} is not an OpenAI function schema"
            )
        if not fn.get("description"):
            raise CheckFailed(
                f"tool '{fn['name']}' has no description; the model reads it to know what the tool does"
            )
        json.dumps(s)
    return None


async def _odd_inputs(factory: Callable[[], Any], seed: int) -> str | None:
    """Each tool called with inputs its schema allows but a careless tool trips on (an empty
    text, a name nothing has, a NUL, the bounds of a number): it must answer, with a result
    or a ToolCallError the model reads, never raise."""
    env = factory()
    try:
        if not isinstance(env.unwrapped, ToolEnv):
            return None
        tool_env = env.unwrapped
        await tool_env.areset(seed=seed)
        for schema in tool_env.tool_schemas():
            function = schema["function"]
            for k in range(ODD_SETS):
                if tool_env.done:
                    await tool_env.areset(seed=seed)
                arguments = _odd_arguments(function.get("parameters") or {}, k)
                call = ToolCall(function["name"], arguments)
                returned = await tool_env.astep(tool_env.parser.render([call]))
                _check_step(returned)
                raised = [c for c in returned[4]["tool_calls"] if c.get("error") == "exception"]
                if raised:
                    shown = one_line(json.dumps(arguments, ensure_ascii=True), 160)
                    raise CheckFailed(
                        f"tool '{function['name']}' raised on the input {shown}: "
                        f"{one_line(returned[4].get('error'))}. A tool answers a bad input "
                        "it can be given with ToolCallError (the model reads why); an "
                        "exception is a bug"
                    )
    finally:
        await env.aclose()
    return None


def _odd_arguments(parameters: dict[str, Any], k: int) -> dict[str, Any]:
    """The k-th set of odd values for a tool's parameters, each within its schema."""
    properties = parameters.get("properties") or {}
    return {name: _odd_value(spec, k) for name, spec in properties.items()}


def _odd_value(spec: Any, k: int) -> Any:
    if not isinstance(spec, dict):
        return ""
    if spec.get("enum"):
        return spec["enum"][k % len(spec["enum"])]
    options = [
        o for o in spec.get("anyOf") or [] if isinstance(o, dict) and o.get("type") != "null"
    ]
    if options:
        return _odd_value(options[0], k)
    kind = spec.get("type")
    if kind in ("integer", "number"):
        low, high = spec.get("minimum", -1), spec.get("maximum", 10**9)
        value = [low, high, 0][k % 3]
        value = min(max(value, low), high)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return k % 2 == 0
    if kind == "array":
        return []
    if kind == "object":
        return {}
    low, high = spec.get("minLength", 0), spec.get("maxLength", 5000)
    text = ["", "no_such_name_xyz", "\x00 ../../x"][k % 3] if k < 3 else "x" * 5000
    return (text + "x" * low)[: max(low, min(high, len(text) + low))]


async def _episodes(factory: Callable[[], Any], seed: int, episodes: int) -> str | None:
    notes = []
    for k in range(episodes):
        env = factory()
        try:
            await env.areset(seed=seed + k)
            scripted = env.scripted_action() is not None
            total, ended, handed_back = 0.0, False, False
            for _ in range(MAX_EPISODE_STEPS):
                action = env.scripted_action() if scripted else env.action_space.sample()
                returned = await env.astep(action)
                _check_step(returned)
                _no_tool_raised(returned[4], k, seed + k)
                total += float(returned[1])
                handed_back |= returned[4].get("result") is not None
                if returned[2] or returned[3]:
                    ended = True
                    break
        finally:
            await env.aclose()
        if not ended:
            notes.append(
                f"episode {k} did not end within {MAX_EPISODE_STEPS} steps; add a turn limit (truncated)"
            )
        elif scripted and total <= 0 and not handed_back:  # a proposer's success is its task
            raise CheckFailed(
                f"the scripted solver got return {total} in episode {k} (seed {seed + k}) and "
                "handed back no result; it should solve the task"
            )
    return "; ".join(notes) or None


def _no_tool_raised(info: dict[str, Any], episode: int, seed: int) -> None:
    raised = [c for c in info.get("tool_calls", []) if c.get("error") == "exception"]
    if raised:
        first = one_line(info.get("error"))
        raise CheckFailed(
            f"tool '{raised[0].get('name')}' raised in episode {episode} (seed {seed}): {first}. "
            "A tool returns expected failures as text for the model and raises InfraError for "
            "a service that is down; any other exception is a bug"
        )


async def _reward_integrity(factory: Callable[[], Any], seed: int) -> str | None:
    """Blind answers and self-masking inputs through the env's tools (reward_probes.py)."""
    found = await probe(factory, seed)
    if found.blind_paid:
        raise CheckFailed(
            "the reward pays answers that know nothing of the task: "
            + "; ".join(found.blind_paid[:4])
            + ". Success must mean solved: give Outcome(solved=...) (info['solved']) by the "
            "verifier's own notion of correct, and keep partial credit out of it"
        )
    if found.masked:
        raise CheckFailed(
            "a policy's own input was filed as an infrastructure failure (masked, so it leaves "
            "every rate): " + "; ".join(found.masked[:3]) + ". Classify a failure by where it "
            "happened: what the policy's input caused is its own (a 0), never a mask"
        )
    if found.partial_credit:
        return "blind answers earn partial credit (not counted as solved): " + "; ".join(
            found.partial_credit[:3]
        )
    return Passed(f"{found.probes} blind or hostile answers: none paid, none masked")


def _gymnasium(factory: Callable[[], Any]) -> str | None:
    """Gymnasium's own checker on a fresh instance; its warnings (gymnasium.logger's, marked
    "WARN:") are the notes. Recording warnings catches every one the process raises meanwhile,
    so others (a ResourceWarning from an object of earlier work collected now) are no note on
    this env."""
    env = factory()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                gymnasium_check_env(env, skip_render_check=True)
            except AssertionError as exc:
                raise CheckFailed(f"Gymnasium's checker: {exc}") from None
    finally:
        env.close()
    notes = sorted({
        str(w.message) for w in caught
        if "WARN:" in str(w.message) and "render" not in str(w.message).lower()
    })  # fmt: skip
    return "; ".join(notes) or None


def _close_twice(factory: Callable[[], Any]) -> str | None:
    env = factory()
    env.reset(seed=0)
    env.close()
    try:
        env.close()
    except Exception as exc:
        raise CheckFailed(
            f"close() raised on an already closed env ({type(exc).__name__}: {exc}); it must be idempotent"
        ) from None
    return None


def _shape(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a {len(value)}-tuple"
    return f"a {type(value).__name__}"
