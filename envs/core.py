"""The Env contract: a `gymnasium.Env` whose observations are chat messages and whose
actions are the model's raw text, stepped asynchronously.

Field by field:

- observation: a *new* list of OpenAI-format messages each call. `areset` returns the opening
  messages (system, user); `astep` returns only the messages the environment adds in answer
  to the action (tool results, feedback). The caller keeps the conversation; the env never
  re-sends earlier messages, so the rollout layer can append them as a token delta.
- action: the model's whole turn as a string (tool calls inside, in the env's format).
- reward: a float for this step; sparse envs give 0 until the end.
- terminated: the task reached an end state (solved, failed for good). truncated: the episode
  was cut short (turn limit, context budget) although the task could go on. A learner
  bootstraps through truncation, never through termination: the two are not interchangeable.
- info, returned by reset and by every step:
    state_key    hashable key of the state the env is now in. GiGPO groups step t by the
                 key that reset (t = 0) or step t-1 returned. The env decides what "same
                 state" means; the default (ToolEnv) hashes the observation's text.
    valid_action whether the action was well-formed (parsed, known tools, valid arguments).
    tool_calls   the calls made this step: id, name, arguments, error kind (None if ok).
    error        text of what went wrong with the action, or None.
    infra_error  text of an infrastructure failure (not the policy's fault: masked from
                 training, never scored 0), or None.
  and, when the env has them:
    tools        (reset) the tools' JSON schemas, which the prompt lists when asked to.
    result       (step) what a tool handed back as data (JSON, at most RESULT_LIMIT
                 characters), kept in the trajectory beside the text the policy read.
- reset(seed, options={"task": task}) is deterministic: the same task and seed give the same
  initial state, so a group of N rollouts starts identically. Tasks come from the env's
  `task_source()` (envs/tasks/__init__.py) in named splits; the default, `SeedTasks`, makes each
  task a seed ({"seed": s}, reset with seed=s), for envs that generate their tasks.
- Instances are reused: `areset` on a live instance starts a new episode that must not
  depend on earlier ones. What is expensive to make and can be shared between instances (an
  engine, a pool, a browser) is asked for with `await self.shared(key, open)` and lives as
  long as its owner (the runtime's, or the env's own when used alone; envs/resources.py).

Sync `reset`/`step`/`close` run the coroutines on a private event loop (one per env, so
loop-bound resources such as HTTP sessions survive between steps), or, for an env that shares
resources living on a loop of their own (`Resources(loop=...)`: the checker's), on that loop;
inside a running loop use the async methods.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping
from typing import Any, ClassVar, TypeVar

import gymnasium

from toolgym.envs.resources import Resources
from toolgym.envs.spaces import MessagesSpace, TextSpace
from toolgym.envs.tasks import SeedTasks, TaskSource
from toolgym.errors import ConfigError

Message = dict[str, Any]
R = TypeVar("R")
T = TypeVar("T")

INFO_KEYS = ("state_key", "valid_action", "tool_calls", "error", "infra_error")
"""What every reset's and step's info holds (make_info fills them)."""
OPTIONAL_INFO_KEYS = ("tools", "result", "solved")
"""What the rollout also reads when an env gives it; nothing else in info is read. "solved"
(a bool) is the env's verdict of success, the last one given counting (ToolEnv gives it on
every step, false until a verdict solves the task): an env that never gives it is counted
successful when its return is above 0."""
RESULT_LIMIT = 64 << 10
"""The most characters a step's result may take as JSON."""


def make_info(
    state_key: Hashable,
    *,
    valid_action: bool = True,
    tool_calls: list[dict[str, Any]] | None = None,
    error: str | None = None,
    infra_error: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A fresh info dict with every key of the contract."""
    return {
        "state_key": state_key,
        "valid_action": valid_action,
        "tool_calls": list(tool_calls or []),
        "error": error,
        "infra_error": infra_error,
        **extra,
    }


def check_options(options: Any) -> None:
    """Raise ConfigError for reset options of the wrong shape, naming what was given."""
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise ConfigError(f"reset's options must be a dict, got {type(options).__name__}")
    task = options.get("task")
    if task is not None and not isinstance(task, Mapping):
        raise ConfigError(
            f"options['task'] must be a task, a dict of its fields; got {type(task).__name__} "
            f"{str(task)[:80]!r}"
        )


def copy_messages(messages: list[Message]) -> list[Message]:
    """Fresh message dicts (and content-part lists) for the caller to keep: far cheaper than
    a deepcopy, and enough because message values are strings or lists of flat parts."""
    return [
        {k: [dict(p) for p in v] if isinstance(v, list) else v for k, v in m.items()}
        for m in messages
    ]


class Env(gymnasium.Env[list[Message], str]):
    """Base class of every toolgym environment. Subclasses implement `areset` and `astep`
    (starting `areset` with `await super().areset(seed=seed, options=options)`, which seeds
    `self.np_random`), and `aclose` if they hold resources."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium's declaration)
    observation_space = MessagesSpace()
    action_space = TextSpace()
    shared_items: ClassVar[str | None] = None
    """Why eval episodes may open exactly as train episodes do, where that is by design (a
    proposer's prompt, the same every episode); None: they must not, and `toolgym check`
    warns of an env whose eval items training also draws, naming the fix."""

    _loop: asyncio.AbstractEventLoop | None = None
    _resources: Resources | None = None
    _owns_resources = False

    @property
    def unwrapped(self) -> Env:
        """This env: a toolgym env is not wrapped (an episode awaits its own areset/astep)."""
        return self

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Any:
        """Start an episode; subclasses return (messages, info). Checks the shape of
        `options` (a dict; its "task", if any, a dict of the task's fields)."""
        check_options(options)
        gymnasium.Env.reset(self, seed=seed)

    async def astep(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        """Apply the model's turn; return (messages, reward, terminated, truncated, info)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async def astep(self, action)`"
        )

    async def aclose(self) -> None:
        """Release what this instance holds. Must be safe to call twice; an override calls
        `await super().aclose()`, which closes the shared resources the env owns itself."""
        resources, owned = self._resources, self._owns_resources
        self._resources, self._owns_resources = None, False
        if resources is not None and owned:
            await resources.aclose()

    def task_source(self) -> TaskSource:
        """This env's tasks in splits (train, eval, test); the default generates them from
        seeds. Envs over a task list return a `ListTasks`."""
        return SeedTasks()

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """`task` as sent by a client of a served env (`--allow-client-tasks`), checked for
        play, or a ConfigError saying what a client may not set (envs/tasks/client.py). An
        env takes no client tasks unless it says which fields are plain data: a task's
        fields may name files or code that only the server's operator may choose."""
        raise ConfigError(
            f"{type(self).__name__} takes no tasks from clients: reset with a seed (and a "
            "split) to play one of its own"
        )

    def use_resources(self, resources: Resources) -> None:
        """Share `resources` (the runtime's) instead of making a private set."""
        self._resources, self._owns_resources = resources, False

    @property
    def resources(self) -> Resources:
        """The shared resources this instance uses (a private set when used on its own)."""
        if self._resources is None:
            self._resources, self._owns_resources = Resources(), True
        return self._resources

    async def shared(self, key: Hashable, open: Callable[[], T | Awaitable[T]]) -> T:
        """The shared resource under `key`, made by `open()` if nobody has made it yet."""
        return await self.resources.get(key, open)

    def scripted_action(self) -> str | None:
        """A scripted solver's next action in the current state, for demonstrations, checks and
        benchmarks; None when the env has no solver."""
        return None

    def mistake_action(self, rng: random.Random) -> str | None:
        """A plausible wrong action in the current state (one the scripted solver would not
        take), so demonstrations can show recovering from mistakes; None when the env has none."""
        return None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        return self._run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        return self._run_sync(self.astep(action))

    def close(self) -> None:
        self._run_sync(self.aclose())
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _run_sync(self, coro: Coroutine[Any, Any, R]) -> R:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                f"{type(self).__name__}: the sync API was called inside a running event loop; "
                "use `await env.areset()`, `await env.astep()` and `await env.aclose()` there"
            )
        home = self._resources.home_loop() if self._resources is not None else None
        if home is not None:  # the loop of the resources it shares (a check's, a test's)
            if home.is_running():
                return asyncio.run_coroutine_threadsafe(coro, home).result()
            return home.run_until_complete(coro)
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
            # an env dropped without close() still closes its loop when it is collected
            weakref.finalize(self, _close_loop, self._loop)
        return self._loop.run_until_complete(coro)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.close()
