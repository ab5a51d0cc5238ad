"""The one episode runner over env pools: hundreds of concurrent episodes on reused
instances; an env that raises, hangs or answers in the wrong shape ends only its own episode
(masked, within its timeout) and is retired for a fresh one; shared resources are made once
and closed with their owner; nothing is leaked."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

import fixture_envs
from toolgym.agents.collector import RolloutCollector, pools_of, requests_for
from toolgym.agents.engines.base import Capabilities, Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.trajectory import EpisodeEnd
from toolgym.envs import EnvPool, SeedTasks

GUESS_HEADS = '<tool_call>{"name": "guess", "arguments": {"side": "heads"}}</tool_call>'


class SayEngine:
    """A policy that always says `text` (the runner, not the model, is under test here)."""

    capabilities = Capabilities("shared")  # no weights to sync, no context kept

    def __init__(self, renderer: ChatRenderer, text: str = GUESS_HEADS) -> None:
        self.ids = renderer.encode(text) + renderer.closing_ids()
        self.text = text

    async def generate(self, prompt_ids, sampling, adapter=None):
        await asyncio.sleep(0)
        return Completion(list(self.ids), [0.0] * len(self.ids), self.text, "stop")

    async def aclose(self):
        pass


@pytest.fixture(scope="module")
def renderer(tiny_tokenizer):
    return ChatRenderer(tiny_tokenizer)


def child_processes() -> list[str]:
    out: list[str] = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            out += f.read().split()
    return out


def collect(renderer, pools, requests, concurrency=64, call_timeout_s=2.0):
    config = RolloutConfig(SamplingParams(max_tokens=64), call_timeout_s=call_timeout_s)
    collector = RolloutCollector(
        SayEngine(renderer), renderer, config, pools_of(*pools), concurrency=concurrency
    )
    return collector.collect(requests)


def draws(n, start=0):
    return [SeedTasks().draw("train", i) for i in range(start, start + n)]


def test_256_episodes_finish_while_a_raising_and_a_hanging_env_are_masked(renderer):
    threads, children = threading.active_count(), child_processes()

    async def main():
        pools = [
            EnvPool(fixture_envs.CoinEnv, name="coin"),
            EnvPool(fixture_envs.RaisingEnv, name="raising"),
            EnvPool(fixture_envs.HangingEnv, name="hanging"),
        ]
        requests = requests_for(pools[0].ref, draws(256))
        requests += requests_for(pools[1].ref, draws(1)) + requests_for(pools[2].ref, draws(1))
        groups = await collect(renderer, pools, requests, call_timeout_s=1.0)
        for pool in pools:
            await pool.aclose()
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return pools, [g.trajectories[0] for g in groups], leftover

    pools, trajectories, leftover = asyncio.run(main())
    good, raising, hanging = trajectories[:256], trajectories[256], trajectories[257]
    assert all(t.end is EpisodeEnd.TERMINATED and not t.masked for t in good)
    assert 0 < sum(t.total_reward for t in good) < 256  # heads is right only sometimes
    assert raising.end is EpisodeEnd.ENV_FAILED
    assert raising.infra_error == "step raised RuntimeError: sandbox died"
    assert (
        hanging.end is EpisodeEnd.ENV_FAILED and hanging.infra_error == "step timed out after 1 s"
    )
    assert hanging.elapsed_s < 2.5
    assert pools[0].built <= 64  # at most one instance per concurrent episode, then reused
    assert leftover == []
    assert threading.active_count() == threads and child_processes() == children


def test_instances_are_reused_and_a_failed_one_is_retired(renderer):
    built = []

    def flaky():
        env = fixture_envs.RaisingEnv() if not built else fixture_envs.CoinEnv()
        built.append(env)
        return env

    async def main():
        async with EnvPool(flaky, name="flaky") as pool:
            out = []
            for draw in draws(4):  # one at a time: each episode may reuse the last instance
                out += await collect(
                    renderer, [pool], requests_for(pool.ref, [draw]), concurrency=1
                )
            return pool, list(pool.idle), out

    pool, idle, groups = asyncio.run(main())
    assert [g.trajectories[0].masked for g in groups] == [True, False, False, False]
    assert len(built) == pool.built == 2  # the raising one retired, the next one reused
    assert idle == [built[1]]
    # A reused instance starts each episode from its own task: the same seed, the same coin.
    coin = EnvPool(fixture_envs.CoinEnv)
    again = asyncio.run(collect(renderer, [coin], requests_for(coin.ref, draws(3, 1))))
    assert [g.trajectories[0].total_reward for g in groups[1:]] == [
        g.trajectories[0].total_reward for g in again
    ]


def test_broken_factories_and_wrong_shapes_are_reported_with_their_phase(renderer):
    def no_env():
        raise OSError("no sandbox slots left")

    async def main():
        broken = EnvPool(no_env, name="broken")
        wrong = EnvPool(fixture_envs.WrongArityEnv, name="wrong")
        groups = await collect(
            renderer,
            [broken, wrong],
            requests_for(broken.ref, draws(1)) + requests_for(wrong.ref, draws(1)),
        )
        await wrong.aclose()
        return [g.trajectories[0] for g in groups], wrong

    (failed_build, wrong_shape), wrong = asyncio.run(main())
    assert failed_build.infra_error == "building the env raised OSError: no sandbox slots left"
    expected = "step returned 4 values, expected a 5-tuple (run `toolgym check`)"
    assert wrong_shape.infra_error == expected and wrong_shape.end is EpisodeEnd.ENV_FAILED
    assert wrong.built == 1 and wrong.idle == []  # retired, not kept


class Counter:
    """A shared resource that counts how often it is made and closed."""

    made = closed = 0

    def __init__(self):
        Counter.made += 1

    async def aclose(self):
        Counter.closed += 1


class SharingCoinEnv(fixture_envs.CoinEnv):
    async def start(self, seed, options):
        self.counter = await self.shared(("counter",), Counter)
        return await super().start(seed, options)


def test_shared_resources_are_made_once_and_closed_with_their_owner(renderer):
    Counter.made = Counter.closed = 0

    async def main():
        async with EnvPool(SharingCoinEnv, name="sharing") as pool:
            groups = await collect(
                renderer, [pool], requests_for(pool.ref, draws(64), size=2), concurrency=16
            )
            assert Counter.closed == 0 and pool.resources.opened == 1
            return pool, groups

    pool, groups = asyncio.run(main())
    assert sum(len(g.trajectories) for g in groups) == 128
    assert not any(t.masked for g in groups for t in g.trajectories)
    assert Counter.made == 1 and Counter.closed == 1 and 1 < pool.built <= 16
    # Used on its own, an env owns a private set, closed with the env.
    env = SharingCoinEnv()
    env.reset(seed=0)
    assert Counter.made == 2
    env.close()
    assert Counter.closed == 2
