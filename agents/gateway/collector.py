"""Groups played by an agent harness through the gateway: each request's task, `size` copies
of the agent at once, each copy one gateway session (one episode), scored by its result.

An episode: an env instance from the request's pool is reset with the task (its opening is
the agent's `task.prompt`, and it keeps the task's answer for the checker); a session is
opened; the agent runs against the session's URL, within the episode timeout and an idle
timeout (no call for that long: abandoned); the result is scored and recorded as the
trajectory's `result` score (the reward source of that name gives it to the last call;
`Step.reward` stays the env's). Whose fault a failure is goes by where it happened, never by what the
agent says: an agent that raises, exits with an error, hangs or is abandoned before it ever
called the model could not be run (masked); once the policy has replied, the agent's failure
is the policy's doing (a framework's turn limit, a reply it could not parse, a loop the
replies kept going): it counts, with reward 0, and its last step says why, so a policy
cannot mask the episodes it is losing. An engine that fails a call, and an env or checker
that fails, mask the episode (infra errors, never a 0). An agent that fails after the
gateway refused a call for its budget ended by the policy's doing: it counts, with reward 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolgym.agents.collector import Collector, GroupRequest, PoolSource
from toolgym.agents.gateway.harness import Harness, HarnessFailed, HarnessTask
from toolgym.agents.gateway.result_check import RESULT, ResultCheck, Verdict
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import Session, SessionSettings
from toolgym.agents.rollout import EpisodeRequest
from toolgym.agents.trajectory import EpisodeEnd, Trajectory, TrajectoryGroup
from toolgym.agents.vision import text_only
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.tasks.expected_answer import expected_answer
from toolgym.envs.tool_env import SOLVED_REWARD
from toolgym.errors import RunFailedError, one_line

ANSWER_CHARS = 2000
"""An agent's answer and its checker's reply are kept with the episode up to this length."""


@dataclass(frozen=True)
class HarnessLimits:
    episode_timeout_s: float = 600.0
    idle_timeout_s: float = 120.0
    """An episode whose agent makes no call for this long is abandoned (masked)."""
    concurrency: int = 64
    """Agents running at once."""


class HarnessCollector(Collector):
    """Groups played by an agent harness through the gateway (`HarnessEpisode`), in the same
    frame as the env's own loop."""

    def __init__(
        self, gateway: Gateway, harness: Harness, reward: ResultCheck,
        settings: SessionSettings, pools: PoolSource, limits: HarnessLimits = HarnessLimits(),
        on_episode: Callable[[Trajectory], None] | None = None,
    ) -> None:  # fmt: skip
        way = HarnessEpisode(gateway, harness, reward, settings, limits)
        super().__init__(way, pools, concurrency=limits.concurrency, on_episode=on_episode)
        self.harness = harness

    async def collect(
        self,
        requests: Sequence[GroupRequest],
        adapter: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[TrajectoryGroup]:
        """One group per request, in order; `options` go to every reset besides the task. An
        agent that never reaches the gateway stops the run: nothing would ever be learned."""
        groups = await super().collect(requests, adapter, options)
        unmasked = [t for g in groups for t in g.trajectories if not t.masked]
        if unmasked and not any(t.steps for t in unmasked):
            raise RunFailedError(
                f"none of the {len(unmasked)} episodes the agent finished made a model call "
                f"through the gateway ({self.harness.name}): the agent must send its calls to "
                "the base_url and api_key it is given"
            )
        return groups


class HarnessEpisode:
    """The harness as a way to play an episode: the env instance, reset with the task, keeps
    the answer for the checker; the agent plays against a gateway session; its result is
    scored, as the trajectory's `result` score."""

    def __init__(
        self, gateway: Gateway, harness: Harness, reward: ResultCheck,
        settings: SessionSettings, limits: HarnessLimits,
    ) -> None:  # fmt: skip
        self.gateway, self.harness, self.reward = gateway, harness, reward
        self.settings, self.limits = settings, limits

    async def play(self, env: EpisodeEnv, traj: Trajectory, request: EpisodeRequest) -> None:
        """Play one episode into `traj` (an env that fails ends it `ENV_FAILED`, so the
        frame retires the instance)."""
        settings = replace(self.settings, adapter=request.adapter)
        options = request.reset_options()
        try:
            async with asyncio.timeout(self.limits.episode_timeout_s):
                opening, _ = await env.areset(seed=traj.seed, options=options)
        except Exception as exc:
            _masked(traj, EpisodeEnd.ENV_FAILED, f"the env's reset failed: {_why(exc)}")
            return
        traj.messages = list(opening)  # until the agent's first call says what the model read
        task = HarnessTask(traj.id, _prompt(opening), list(opening), traj.seed)
        session = self.gateway.open(settings, traj)
        refused = self.gateway.admission.refused
        policy_failed: str | None = None
        try:
            result = await self._run(session, task)
        except TimeoutError as exc:
            if not traj.steps:
                _masked(traj, EpisodeEnd.TIMEOUT, str(exc))
                return
            result, policy_failed = None, str(exc)
        except Exception as exc:  # the agent's failure (HarnessFailed), or its command's
            why = str(exc) if isinstance(exc, HarnessFailed) else f"the harness failed: {_why(exc)}"
            if session.ended is None and not traj.steps:
                _masked(traj, EpisodeEnd.INFRA_ERROR, why + self._refusals_since(refused))
                return
            result = None  # a budget ended it, or the agent failed on the policy's replies
            policy_failed = None if session.ended else why
        finally:
            self.gateway.close(session)
        if session.failed:
            _masked(traj, EpisodeEnd.INFRA_ERROR, session.failed)
            return
        traj.end = session.ended.end if session.ended else EpisodeEnd.TERMINATED
        if not traj.steps:  # the agent never asked the model: nothing to score or learn,
            traj.solved = False  # and no verdict: a reward it reported is no success
            return
        unanswered = (session.ended or policy_failed is not None) and result is None
        try:
            verdict = (
                Verdict(0.0, "no answer: the episode ended first")
                if unanswered
                else (await self.reward.score(env, traj.task, result))
            )
        except Exception as exc:
            _masked(traj, EpisodeEnd.ENV_FAILED, f"scoring the result failed: {_why(exc)}")
            return
        reward = verdict.score
        traj.record(RESULT, reward)
        traj.answer = None if result is None else one_line(result, ANSWER_CHARS)
        traj.verdict = one_line(verdict.said, ANSWER_CHARS)
        expected = expected_answer(env.unwrapped, traj.task)  # the agent has finished
        traj.expected = None if expected is None else one_line(expected, ANSWER_CHARS)
        if policy_failed is not None:
            traj.steps[-1].error = f"the agent failed after the policy's replies: {policy_failed}"
        traj.solved = reward >= SOLVED_REWARD  # the default rule: a full reward, never partial

    def _refusals_since(self, refused: int) -> str:
        """Why an agent's calls may have failed: connections the gateway refused at its cap
        while the episode ran (an agent that leaves a client open per episode fills it)."""
        admission = self.gateway.admission
        if admission.refused == refused:
            return ""
        count = admission.refused - refused
        return (
            f" (the gateway refused {count} connection{'s' * (count != 1)} meanwhile, at its "
            f"cap of {admission.limit} open at once: an agent that opens a client per episode "
            "must close it, with `async with` or `await client.close()`)"
        )

    async def _run(self, session: Session, task: HarnessTask) -> Any:
        """The agent's result, within the episode and idle timeouts (TimeoutError)."""
        agent = asyncio.ensure_future(
            self.harness.run(task, self.gateway.url_of(session), session.key)
        )
        deadline = time.monotonic() + self.limits.episode_timeout_s
        try:
            while not agent.done():
                idle = self.limits.idle_timeout_s - session.idle_s()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"the agent ran past the episode timeout of "
                        f"{self.limits.episode_timeout_s:g} s"
                    )
                if idle <= 0:
                    raise TimeoutError(
                        f"the agent made no call for {self.limits.idle_timeout_s:g} s (abandoned)"
                    )
                await asyncio.wait([agent], timeout=min(idle, left))
        finally:
            if not agent.done():
                agent.cancel()
                with contextlib.suppress(BaseException):
                    await agent
        return agent.result()


def _prompt(opening: list[dict[str, Any]]) -> str:
    """The opening's last user message (else its last message), as text."""
    readable = text_only(opening)
    users = [m for m in readable if m.get("role") == "user"]
    return str((users or readable or [{}])[-1].get("content") or "")


def _masked(traj: Trajectory, end: EpisodeEnd, why: str) -> Trajectory:
    traj.end, traj.infra_error = end, why
    return traj


def _why(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__
