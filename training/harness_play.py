"""A run's episodes played by the user's agent through the gateway (`harness:` in the config):
the agent and its result reward, made with the run's player (a path that names no function
stops the run there, in one line), and the gateway, started on the run's loop the first time
episodes play and closed with the runtime."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from toolgym.agents.collector import PoolSource
from toolgym.agents.engines import Engine
from toolgym.agents.gateway.choose_harness import make_harness
from toolgym.agents.gateway.collector import HarnessCollector, HarnessLimits
from toolgym.agents.gateway.harness import Harness
from toolgym.agents.gateway.result_check import ResultCheck, result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.gateway.teacher import Teacher
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory
from toolgym.log import get_logger
from toolgym.training.config import HarnessSection

log = get_logger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class HarnessPlay:
    def __init__(
        self, section: HarnessSection, max_turns: int | None, hidden: Sequence[str] = ()
    ) -> None:
        """`hidden`: folders an isolated command sees empty (the run's directory: its stored
        episodes hold tasks' answers)."""
        self.section = section
        self.harness: Harness = make_harness(
            section.agent, section.command, section.pass_env, section.isolate,
            section.concurrency if section.worker else 0, hidden,
        )  # fmt: skip
        self.reward: ResultCheck = result_check(section.reward, section.answer_tool)
        self.max_calls = min(section.max_calls, max_turns or section.max_calls)

    async def collector(
        self, runtime: Runtime, engine: Engine | Teacher, renderer: ChatRenderer, gate: PolicyGate,
        rollout: RolloutConfig, pools: PoolSource,
        on_episode: Callable[[Trajectory], None] | None,
    ) -> HarnessCollector:  # fmt: skip
        """A collector for one call's groups, sampled as `rollout` says (or answered by a
        teacher: the warm start)."""
        s = self.section

        async def start() -> Gateway:
            gateway = Gateway(engine, renderer, renderer.tokenizer, gate, s.concurrency)
            await gateway.start(s.host, s.port)
            if s.host not in LOOPBACK:
                log.warning(
                    "the gateway listens on %s, beyond this machine (harness.host): each call "
                    "still needs its session's key", gateway.base_url,
                )  # fmt: skip
            return gateway

        gateway: Gateway = await runtime.resources.get("gateway", start)
        await runtime.resources.get("harness", lambda: self.harness)  # closed with the run
        settings = SessionSettings(
            sampling=rollout.sampling, max_calls=self.max_calls,
            max_completion_tokens=s.max_completion_tokens,
            max_context_tokens=rollout.max_context_tokens, hold_calls=rollout.hold_turns,
        )  # fmt: skip
        limits = HarnessLimits(
            rollout.episode_timeout_s or HarnessLimits.episode_timeout_s, s.idle_timeout_s,
            s.concurrency,
        )  # fmt: skip
        return HarnessCollector(gateway, self.harness, self.reward, settings, pools, limits,
                                on_episode)  # fmt: skip
