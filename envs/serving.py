"""What a server of toolgym envs (`toolgym serve env`, `toolgym serve mcp`) owes its clients,
whatever the protocol.

- **One cap.** Every env a client makes the server build counts against `max_sessions`:
  a session's env, and the env of a single sessionless call. A client over the cap is
  refused in words; nobody else's session is closed to make room.
- **One idle rule.** A session unused for `idle_timeout_s` is closed: its env closed, its
  slot freed, and its id remembered, so the client's next message is told the session
  ended instead of running on an env made anew.
- **Shared resources.** The envs of all sessions share the server's resources (one browser
  with a context per episode, one sandbox pool, one database pool), so a session costs
  an env, not a browser.
- **Tasks.** A client plays the env's own tasks, by seed and split. A task of its own is
  taken only when the operator allows it (`--allow-client-tasks`), and then only as the env's
  `client_task` checks it: data, never code, a file or a loopback address.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolgym.envs.core import Env
from toolgym.envs.registration import make
from toolgym.envs.resources import Resources
from toolgym.envs.tasks import SPLITS
from toolgym.errors import ConfigError, ToolgymError, one_line
from toolgym.log import get_logger

log = get_logger(__name__)

REMEMBERED_ENDINGS = 4096
"""Ended sessions whose ids are remembered (oldest forgotten first), to tell their clients."""


class CapacityError(ToolgymError, RuntimeError):
    """The server holds as many live envs as it may."""


class SessionEnded(ToolgymError, LookupError):
    """A session that was closed (idle, or by its client) was used again."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class Session:
    """One client's env and when the client last used it."""

    key: str
    env: Env | None
    """Built when the session opens, or at its first use (`EnvHost.env`)."""
    on_expire: Callable[[str], Awaitable[None]] | None = None
    """Told the reason when the idle rule closes this session (a WebSocket closes itself)."""
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One message at a time: the env keeps state."""
    episode_over: bool = True
    """No episode is running: a step before a reset, or after the end, is refused."""


class EnvHost:
    """Builds and keeps the envs of a server's clients.

    Args:
        env_id, env_kwargs: the env every client plays.
        max_sessions: the most live envs at once (sessions and single calls together).
        idle_timeout_s: a session unused this long is closed; None keeps sessions forever.
        allow_client_tasks: take a client's own task (checked by the env's `client_task`).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        max_sessions: int = 32,
        idle_timeout_s: float | None = 600.0,
        allow_client_tasks: bool = False,
    ) -> None:
        if max_sessions < 1:
            raise ConfigError(f"--max-sessions must be at least 1, got {max_sessions}")
        if idle_timeout_s is not None and idle_timeout_s <= 0:
            raise ConfigError(f"--idle-timeout must be positive, got {idle_timeout_s}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.allow_client_tasks = allow_client_tasks
        self.resources = Resources()
        self.sessions: dict[str, Session] = {}
        self._building = 0
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._reaper: asyncio.Task[None] | None = None

    # ----- lifetime -------------------------------------------------------------------------
    def check(self) -> Env:
        """Build one env to fail early, in words, on a bad id or argument; the caller
        closes it (or keeps it to describe the server)."""
        env = make(self.env_id, **self.env_kwargs).unwrapped
        if not isinstance(env, Env):
            raise ConfigError(f"{self.env_id} is not a toolgym env: it cannot be served")
        return env

    def start(self) -> None:
        """Start the idle rule (on the server's event loop)."""
        if self.idle_timeout_s is not None and self._reaper is None:
            self._reaper = asyncio.create_task(self._reap())

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for key in list(self.sessions):
            await self.close(key, "the server stopped")
        await self.resources.aclose()

    @property
    def live(self) -> int:
        """Sessions, envs of single calls, and slots reserved for sessions being opened."""
        return len(self.sessions) + self._building

    def capacity_message(self) -> str:
        return (
            f"the server is at capacity: {self.max_sessions} sessions are live "
            "(--max-sessions); try again later"
        )

    # ----- sessions -------------------------------------------------------------------------
    async def open(
        self, key: str, on_expire: Callable[[str], Awaitable[None]] | None = None
    ) -> Session:
        """A new session under `key` with an env of its own; CapacityError when full."""
        if key in self.sessions:
            raise ConfigError(f"session {key[:64]!r} is already open")
        env = await self._build()
        session = self.sessions[key] = Session(key, env, on_expire)
        self._building -= 1
        self._ended.pop(key, None)
        return session

    def reserve(self) -> bool:
        """Hold a slot for a session a protocol is opening (False when full); `adopt` it
        under the session's key, or `release` it."""
        if self.live >= self.max_sessions:
            return False
        self._building += 1
        return True

    def release(self) -> None:
        self._building -= 1

    def adopt(self, key: str) -> None:
        """Turn a reserved slot into a session whose env is built at its first use."""
        self._building -= 1
        self.sessions[key] = Session(key, None)
        self._ended.pop(key, None)

    async def env(self, session: Session) -> Env:
        """The session's env, built now if the session was opened without one."""
        if session.env is None:  # its slot is the session's, counted when it opened
            env = self.check()
            env.use_resources(self.resources)
            session.env = env
        return session.env

    def get(self, key: str) -> Session:
        """The live session under `key` (marked used); SessionEnded for one that ended,
        KeyError for one never opened."""
        session = self.sessions.get(key)
        if session is None:
            ended = self._ended.get(key)
            if ended is not None:
                raise SessionEnded(f"this session ended: {ended}; open a new one")
            raise KeyError(key)
        session.last_used = time.monotonic()
        return session

    async def close(self, key: str, reason: str) -> None:
        """End a session: close its env and remember why, for its client."""
        session = self.sessions.pop(key, None)
        if session is None:
            return
        self._ended[key] = reason
        while len(self._ended) > REMEMBERED_ENDINGS:
            self._ended.popitem(last=False)
        if session.env is not None:
            await _close_env(session.env)

    @contextlib.asynccontextmanager
    async def single_use(self) -> AsyncIterator[Env]:
        """An env for one sessionless call, counted while it lives."""
        env = await self._build()
        try:
            yield env
        finally:
            self._building -= 1
            await _close_env(env)

    async def _build(self) -> Env:
        """An env on the server's resources, its slot counted from the start (so a burst of
        clients cannot build past the cap while earlier builds are still running)."""
        if not self.reserve():
            raise CapacityError(self.capacity_message())
        try:
            env = self.check()
            env.use_resources(self.resources)
            return env
        except BaseException:
            self._building -= 1
            raise

    async def _reap(self) -> None:
        assert self.idle_timeout_s is not None
        timeout = self.idle_timeout_s
        while True:
            await asyncio.sleep(max(min(timeout / 4, 5.0), 0.05))
            now = time.monotonic()
            for key, session in list(self.sessions.items()):
                if now - session.last_used <= timeout or session.lock.locked():
                    continue  # in use: a long step is not idleness
                reason = f"idle for over {timeout:g} s"
                try:
                    if session.on_expire is not None:
                        await session.on_expire(reason)
                except Exception as exc:  # the client's connection may already be gone
                    log.debug("telling an expired session: %s", one_line(exc))
                await self.close(key, reason)

    # ----- what a client may reset to -------------------------------------------------------
    async def reset(
        self,
        session: Session,
        seed: Any = None,
        split: Any = None,
        task: Any = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start an episode of the session's env on a task the client may ask for: train
        task `seed`, task `seed` of another `split`, or (when allowed) its own `task`."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"seed is an integer, got {str(seed)[:40]!r}")
        if seed is not None and not 0 <= seed < 2**63:
            raise ConfigError(f"seed {seed} is out of range [0, 2^63)")
        env = await self.env(session)
        options: dict[str, Any] | None = None
        if task is not None:
            if not self.allow_client_tasks:
                raise ConfigError(
                    "this server plays its env's own tasks: reset with a seed (and a split); "
                    "its operator allows a client's own task with --allow-client-tasks"
                )
            if split is not None:
                raise ConfigError("give a task or a split, not both")
            if not isinstance(task, Mapping):
                raise ConfigError(f"a task is an object of its fields, got {type(task).__name__}")
            options = {"task": env.client_task(task)}
        elif split is not None and split != "train":
            if split not in SPLITS:
                raise ConfigError(f"split is one of {', '.join(SPLITS)}, got {str(split)[:40]!r}")
            draw = env.task_source().draw(split, seed if seed is not None else 0)
            seed, options = draw.seed, {"task": draw.task}
        session.episode_over = True
        opened = await env.areset(seed=seed, options=options)
        session.episode_over = False
        return opened


async def _close_env(env: Env) -> None:
    try:
        await env.aclose()
    except Exception as exc:  # closing must not stop the server
        log.warning("closing a served env failed: %s", one_line(exc))
