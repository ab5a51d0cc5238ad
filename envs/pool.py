"""EnvPool: many episodes at once on one asyncio loop, each on its own timeline.

Every reset, step and policy call runs under a timeout. An env that raises or hangs ends only
its own episode, reported as an infrastructure error (masked from training, never scored 0);
the pool closes that env, builds a fresh one from its factory, and the other episodes go on.

What it cannot protect against: an env that blocks the event loop with synchronous work
(`time.sleep`, a CPU-bound loop) stalls every episode, because asyncio cannot pre-empt it;
nor one that catches `CancelledError` and keeps waiting, since a timeout works by
cancelling. Envs must await their slow work (or hand it to a thread or process) and let
cancellation through; sandboxes that run foreign code do so in another process.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolgym.envs.core import Env, Message
from toolgym.log import get_logger

log = get_logger(__name__)


class StopReason(enum.StrEnum):
    TERMINATED = "terminated"
    TRUNCATED = "truncated"
    MAX_STEPS = "max_steps"
    INFRA_ERROR = "infra_error"


@dataclass
class StepRecord:
    action: str
    observation: list[Message]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@dataclass
class EpisodeView:
    """What a policy sees: the env, the episode's seed, the conversation so far, the latest
    info, and a dict the policy may use to remember things within this episode."""

    env: Env
    seed: int | None
    messages: list[Message]
    info: dict[str, Any]
    step: int = 0
    memory: dict[str, Any] = field(default_factory=dict)


Policy = Callable[[EpisodeView], Awaitable[str]]


@dataclass
class EpisodeResult:
    seed: int | None
    slot: int
    stop: StopReason | None = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    infra_error: str | None = None
    elapsed_s: float = 0.0

    @property
    def total_reward(self) -> float:
        return sum(s.reward for s in self.steps)

    @property
    def masked(self) -> bool:
        """True when infrastructure failed: exclude this episode from training statistics."""
        return self.infra_error is not None


async def scripted_policy(view: EpisodeView) -> str:
    """Plays the env's own scripted solver (`Env.scripted_action`)."""
    action = view.env.unwrapped.scripted_action()  # type: ignore[attr-defined]
    if action is None:
        raise RuntimeError(f"{type(view.env.unwrapped).__name__} has no scripted solver")
    return str(action)


class EnvPool:
    """A fixed number of env slots; `run` deals episodes (one per seed) to free slots.

    Args:
        env_fns: one factory per slot; a slot's env is built on first use and rebuilt after
            an infrastructure error.
        step_timeout_s: limit for each reset, step and policy call.
        close_timeout_s: limit for closing an env.
        max_steps: stop an episode after this many steps even if the env would go on.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        step_timeout_s: float = 60.0,
        close_timeout_s: float = 5.0,
        max_steps: int | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("EnvPool needs at least one env factory")
        self.env_fns = list(env_fns)
        self.envs: list[Env | None] = [None] * len(env_fns)
        self.step_timeout_s = step_timeout_s
        self.close_timeout_s = close_timeout_s
        self.max_steps = max_steps

    @classmethod
    def from_id(
        cls,
        env_id: str,
        slots: int,
        *,
        step_timeout_s: float = 60.0,
        close_timeout_s: float = 5.0,
        max_steps: int | None = None,
        **env_kwargs: Any,
    ) -> EnvPool:
        """`slots` envs built by `toolgym.make(env_id, **env_kwargs)`."""
        from toolgym.envs.registration import make

        return cls(
            [lambda: make(env_id, **env_kwargs)] * slots,
            step_timeout_s=step_timeout_s,
            close_timeout_s=close_timeout_s,
            max_steps=max_steps,
        )

    async def run(self, policy: Policy, seeds: Iterable[int | None]) -> list[EpisodeResult]:
        """Play one episode per seed; results come back in the order of `seeds`."""
        todo = list(enumerate(seeds))
        results: list[EpisodeResult | None] = [None] * len(todo)
        queue: asyncio.Queue[tuple[int, int | None]] = asyncio.Queue()
        for item in todo:
            queue.put_nowait(item)

        async def worker(slot: int) -> None:
            while not queue.empty():
                index, seed = queue.get_nowait()
                await asyncio.sleep(0)  # let every free slot take an episode before any runs
                results[index] = await self._episode(slot, policy, seed)

        workers = [
            asyncio.ensure_future(worker(slot)) for slot in range(min(len(self.envs), len(todo)))
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        return [r for r in results if r is not None]

    async def _episode(self, slot: int, policy: Policy, seed: int | None) -> EpisodeResult:
        result = EpisodeResult(seed, slot)
        start = time.perf_counter()
        try:
            env = self._env(slot)
            messages, info = _shaped(
                await self._bounded(env.areset(seed=seed), "reset"), 2, "reset"
            )
            result.reset_info = info
            view = EpisodeView(env, seed, list(messages), info)
            while True:
                action = await self._bounded(policy(view), "policy")
                returned = await self._bounded(env.astep(action), "step")
                obs, reward, terminated, truncated, info = _shaped(returned, 5, "step")
                result.steps.append(
                    StepRecord(action, obs, float(reward), terminated, truncated, info)
                )
                view.messages += [{"role": "assistant", "content": action}, *obs]
                view.info, view.step = info, view.step + 1
                if terminated or truncated:
                    result.stop = StopReason.TERMINATED if terminated else StopReason.TRUNCATED
                    break
                if self.max_steps is not None and view.step >= self.max_steps:
                    result.stop = StopReason.MAX_STEPS
                    break
        except Exception as exc:
            result.stop = StopReason.INFRA_ERROR
            result.infra_error = str(exc) if isinstance(exc, _CallFailed) else _describe("env", exc)
            log.warning("episode (seed %s, slot %d) failed: %s", seed, slot, result.infra_error)
            await self._retire(slot)
        result.elapsed_s = time.perf_counter() - start
        return result

    def _env(self, slot: int) -> Env:
        env = self.envs[slot]
        if env is None:
            try:
                env = self.envs[slot] = self.env_fns[slot]()
            except Exception as exc:
                raise _CallFailed(_describe("building the env", exc)) from exc
        return env

    async def _bounded(
        self, awaitable: Awaitable[Any], what: str, limit: float | None = None
    ) -> Any:
        limit = self.step_timeout_s if limit is None else limit
        try:
            async with asyncio.timeout(limit):
                return await awaitable
        except TimeoutError:
            raise _CallFailed(f"{what} timed out after {limit:g} s") from None
        except Exception as exc:
            raise _CallFailed(_describe(what, exc)) from exc

    async def _retire(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        if env is not None:
            await self._close(env)

    async def _close(self, env: Env) -> None:
        try:
            await self._bounded(env.aclose(), "close", self.close_timeout_s)
        except Exception as exc:
            log.warning("closing %s failed: %s", type(env).__name__, exc)

    async def aclose(self) -> None:
        """Close every env the pool built (bounded by close_timeout_s each)."""
        envs = [e for e in self.envs if e is not None]
        self.envs = [None] * len(self.envs)
        await asyncio.gather(*(self._close(e) for e in envs))

    async def __aenter__(self) -> EnvPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _CallFailed(Exception):
    """A reset, step, policy or close call raised, timed out or returned the wrong shape."""


def _describe(what: str, exc: BaseException) -> str:
    return f"{what} raised {type(exc).__name__}: {exc}"


def _shaped(returned: Any, size: int, what: str) -> Any:
    if not isinstance(returned, tuple) or len(returned) != size:
        got = f"{len(returned)} values" if isinstance(returned, tuple) else type(returned).__name__
        raise _CallFailed(f"{what} returned {got}, expected a {size}-tuple (run `toolgym check`)")
    return returned
