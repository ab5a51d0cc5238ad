"""Monte-Carlo step values: continuations restored by replaying a trajectory's actions are
the very episodes a fresh rollout forced through the same prefix plays, so the values match;
an env that answers a replay differently is masked, never trusted."""

from __future__ import annotations

import asyncio

import pytest

import fixture_envs
import toolgym
from toolgym.agents.collector import BranchRequest, RolloutCollector, pools_of, requests_for
from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.base import Completion
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EpisodeRequest, Prefix, RolloutConfig, run_episode
from toolgym.envs import EnvPool, SeedTasks
from toolgym.training.process.mc_values import step_values

PREFIX = 2
CONTINUATIONS = 3


def maze():
    return toolgym.make("toolgym/Maze-v0", size=3, max_turns=6)


class ForcedPrefix:
    """The engine, except that its first turns are the prefix trajectory's own, which the
    fresh rollout must have asked for with exactly the prefix's tokens."""

    def __init__(self, engine, prefix, turns):
        self.engine, self.prefix, self.turns, self.calls = engine, prefix, turns, 0

    def __getattr__(self, name):
        return getattr(self.engine, name)

    async def generate(self, prompt_ids, sampling, adapter=None, **engine_args):
        turn, self.calls = self.calls, self.calls + 1
        if turn >= self.turns:  # the engine's own keywords too (its episode's key)
            return await self.engine.generate(prompt_ids, sampling, adapter, **engine_args)
        step = self.prefix.steps[turn]
        assert prompt_ids == self.prefix.token_ids[: step.response_start]
        own = self.prefix.token_ids[step.response_start : step.response_end]
        return Completion(own, list(step.logprobs), step.action, step.finish_reason)


@pytest.fixture(scope="module")
def setting(tool_calling_model_dir):
    engine = HFEngine(tool_calling_model_dir, seed=0)
    config = RolloutConfig(SamplingParams(max_tokens=24, temperature=1.0, seed=11))
    # one episode at a time: batched decoding would pad rows differently between the runs
    pools = {
        "maze": EnvPool(maze, name="maze"),
        "drifting": EnvPool(
            lambda: fixture_envs.DriftingMaze(size=3, max_turns=4), name="drifting"
        ),
    }
    collector = RolloutCollector(
        engine, ChatRenderer(engine.tokenizer), config, pools_of(*pools.values()), concurrency=1
    )
    return engine, collector, config, pools


def test_replayed_continuations_equal_fresh_rollouts_of_the_same_prefix(setting):
    engine, collector, config, pools = setting
    pool = pools["maze"]
    (group,) = asyncio.run(
        collector.collect(requests_for(pool.ref, [SeedTasks().draw("train", 3)]))
    )
    (original,) = group.trajectories
    assert len(original.steps) > PREFIX + 1, "the episode must outlast its prefix"
    (replayed,) = asyncio.run(
        collector.branch([BranchRequest(pool.ref, Prefix(original, PREFIX), CONTINUATIONS)])
    )
    fresh = []
    for k in range(CONTINUATIONS):
        forced = ForcedPrefix(engine, original, PREFIX)
        fresh.append(asyncio.run(run_episode(maze(), forced, collector.renderer, config, EpisodeRequest(seed=original.seed, trajectory_id=f"{original.id}/after{PREFIX}:{k}", group_id=original.group_id))))  # fmt: skip
    for a, b in zip(replayed, fresh, strict=True):
        assert not a.masked and not b.masked, (a.infra_error, b.infra_error)
        assert a.token_ids == b.token_ids
        assert [s.reward for s in a.steps] == [s.reward for s in b.steps]
        assert [s.action for s in a.steps[:PREFIX]] == [s.action for s in original.steps[:PREFIX]]
    assert len({tuple(t.token_ids) for t in replayed}) > 1  # the continuations differ
    outcome = original.total_reward
    by_replay = step_values(
        len(original.steps), {PREFIX - 1: [t.total_reward for t in replayed]}, outcome
    )
    by_fresh = step_values(
        len(original.steps), {PREFIX - 1: [t.total_reward for t in fresh]}, outcome
    )
    assert by_replay.tolist() == by_fresh.tolist()


def test_an_env_that_answers_a_replay_differently_masks_the_continuation(setting):
    _, collector, _, pools = setting
    pool = pools["drifting"]
    (group,) = asyncio.run(
        collector.collect(requests_for(pool.ref, [SeedTasks().draw("train", 0)]))
    )
    (original,) = group.trajectories
    (branches,) = asyncio.run(collector.branch([BranchRequest(pool.ref, Prefix(original, 1), 2)]))
    for t in branches:
        assert t.masked and "not deterministic" in t.infra_error, t.infra_error
    [[bad]] = asyncio.run(collector.branch([BranchRequest(pool.ref, Prefix(original, 0), 1)]))
    assert bad.masked and "cannot continue" in bad.infra_error
