"""Rollouts with a real tiny model: exact bookkeeping end to end, many concurrent episodes,
masking of stuck episodes, context budgets, and the JSONL round trip."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch

import fixture_envs
import toolgym
from toolgym.agents.collector import (
    GroupRequest,
    RolloutCollector,
    pools_of,
    requests_for,
    summarize,
)
from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import EpisodeEnd, read_jsonl, write_jsonl
from toolgym.envs import EnvPool, EnvRef, SeedTasks


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return HFEngine(tiny_model_dir, seed=0)


@pytest.fixture(scope="module")
def renderer(engine):
    return ChatRenderer(engine.tokenizer)


def maze(**kwargs):
    return toolgym.make("toolgym/Maze-v0", size=3, max_turns=3, **kwargs)


def play_maze(engine, renderer, seed, max_tokens, **kwargs):
    """One Maze episode (seeded sampling) through run_episode."""
    config = RolloutConfig(SamplingParams(max_tokens=max_tokens, seed=seed), **kwargs)
    return asyncio.run(
        run_episode(
            maze(),
            engine,
            renderer,
            config,
            EpisodeRequest(seed=seed, trajectory_id="t", group_id="g"),
        )
    )


def test_64_concurrent_mazes_finish_and_a_stuck_episode_is_masked(engine, renderer):
    config = RolloutConfig(SamplingParams(max_tokens=24, seed=3), episode_timeout_s=20)
    pool = EnvPool(lambda: fixture_envs.StuckOnSeedMaze(size=3, max_turns=3), name="stuck-maze")
    collector = RolloutCollector(engine, renderer, config, pools_of(pool), concurrency=64)
    draws = SeedTasks().head("train", 64)
    groups = asyncio.run(collector.collect(requests_for(pool.ref, draws)))
    trajectories = [t for g in groups for t in g.trajectories]
    assert len(trajectories) == 64
    (stuck,) = [t for t in trajectories if t.masked]
    assert (
        stuck.seed == 13
        and stuck.end is EpisodeEnd.TIMEOUT
        and stuck.infra_error == "episode timed out after 20 s"
    )
    assert 20 <= stuck.elapsed_s < 25
    others = [t for t in trajectories if t.seed != 13]
    assert all(t.end in (EpisodeEnd.TRUNCATED, EpisodeEnd.TERMINATED) and t.steps for t in others)
    assert collector.masked_total == 1
    stats = summarize(trajectories)
    assert stats.episodes == 64 and stats.masked == 1 and stats.mean_turns > 0


def test_group_members_start_identically_and_sample_differently(engine, renderer):
    pool = EnvPool(maze, name="maze")
    config = RolloutConfig(SamplingParams(max_tokens=12, seed=0), max_turns=1)
    collector = RolloutCollector(engine, renderer, config, pools_of(pool))
    draws = [SeedTasks().draw("eval", k) for k in (4, 9)]
    groups = asyncio.run(collector.collect(requests_for(pool.ref, draws, size=3)))
    assert [g.group_id for g in groups] == ["maze:eval:4", "maze:eval:9"]
    assert [g.seed for g in groups] == [SeedTasks.SPAN + 4, SeedTasks.SPAN + 9]
    for g in groups:
        members = g.trajectories
        assert [t.id for t in members] == [f"{g.group_id}:{k}" for k in range(3)]
        assert (
            len({tuple(t.token_ids[: t.prompt_length]) for t in members}) == 1
        )  # same task, same start
        assert len({t.steps[0].state_key for t in members}) == 1
        assert len({t.steps[0].action for t in members}) == 3  # distinct sampling seeds per member


def test_token_sequence_is_prompt_plus_generated_plus_deltas(engine, renderer):
    env = maze()
    traj = asyncio.run(
        run_episode(
            env,
            engine,
            renderer,
            RolloutConfig(SamplingParams(max_tokens=20, seed=1)),
            EpisodeRequest(seed=5, trajectory_id="t"),
        )
    )
    assert traj.end is EpisodeEnd.TRUNCATED and len(traj.steps) == 3
    rebuilt = renderer.prompt_ids(traj.messages, traj.tools)
    assert traj.prompt_length == len(rebuilt)
    for step in traj.steps:
        assert step.response_start == len(rebuilt)
        generated = traj.token_ids[step.response_start : step.response_end]
        assert len(generated) == len(step.logprobs) > 0
        assert (
            engine.tokenizer.decode(
                generated, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
            == step.action
        )
        rebuilt += generated
        if step is not traj.steps[-1]:
            rebuilt += renderer.delta_ids(step.observation, generated, traj.tools)
    assert rebuilt == traj.token_ids
    assert (
        sum(traj.loss_mask)
        == traj.generated_tokens
        == sum(s.response_end - s.response_start for s in traj.steps)
    )
    assert traj.steps[0].state_key == env.reset(seed=5)[1]["state_key"]
    assert [s.next_state_key for s in traj.steps[:-1]] == [s.state_key for s in traj.steps[1:]]


def test_behaviour_logprobs_equal_the_trainers_recomputation(engine, renderer):
    traj = play_maze(engine, renderer, 8, 16)
    with torch.no_grad():
        logits = engine.model(torch.tensor([traj.token_ids])).logits[0].float()
    log_probs = torch.log_softmax(logits, -1)
    for step in traj.steps:
        targets = torch.tensor(traj.token_ids[step.response_start : step.response_end])
        fresh = (
            log_probs[step.response_start - 1 : step.response_end - 1]
            .gather(-1, targets.unsqueeze(-1))
            .squeeze(-1)
        )
        assert torch.allclose(fresh, torch.tensor(step.logprobs), atol=1e-4)


def test_context_budget_truncates_and_is_respected(engine, renderer):
    budget = 560
    traj = play_maze(engine, renderer, 1, 40, max_context_tokens=budget)
    assert traj.end is EpisodeEnd.CONTEXT and not traj.masked
    assert len(traj.token_ids) <= budget


def test_env_failures_and_infra_errors_are_masked(engine, renderer):
    config = RolloutConfig(SamplingParams(max_tokens=8, seed=0))
    raised = asyncio.run(
        run_episode(fixture_envs.RaisingEnv(), engine, renderer, config, EpisodeRequest(seed=0))
    )
    assert (
        raised.masked
        and raised.end is EpisodeEnd.ENV_FAILED
        and raised.infra_error == "step raised RuntimeError: sandbox died"
    )


def test_a_reward_that_is_not_a_finite_number_fails_the_env(engine, renderer):
    config = RolloutConfig(SamplingParams(max_tokens=8, seed=0))
    for bad in (float("nan"), float("inf"), -float("inf"), "1.0x"):
        env = fixture_envs.NaNRewardEnv(reward=bad)
        traj = asyncio.run(run_episode(env, engine, renderer, config, EpisodeRequest(seed=0)))
        assert traj.masked and traj.end is EpisodeEnd.ENV_FAILED, (bad, traj.end)
        assert "reward" in traj.infra_error and not traj.steps


def test_observations_reach_the_renderer_as_valid_unicode(engine, renderer):
    config = RolloutConfig(SamplingParams(max_tokens=8, seed=0))
    traj = asyncio.run(
        run_episode(fixture_envs.SurrogateEnv(), engine, renderer, config, EpisodeRequest(seed=0))
    )
    assert not traj.masked and traj.end is EpisodeEnd.TERMINATED
    texts = [traj.messages[0]["content"], traj.messages[1]["content"][0]["text"]]
    texts += [m["content"] for s in traj.steps for m in s.observation]
    assert all("\ufffd" in t for t in texts) and all(t.encode("utf-8") for t in texts)


def test_trajectories_round_trip_through_jsonl(engine, renderer, tmp_path):
    traj = play_maze(engine, renderer, 2, 8)
    path = write_jsonl([traj, traj], tmp_path / "out" / "t.jsonl")
    back = read_jsonl(path)
    assert back[0] == traj and back[1].loss_mask == traj.loss_mask
    assert isinstance(back[0].steps[0].state_key, str)


def test_a_request_names_its_env_survives_json_and_runs_where_it_is_sent(engine, renderer):
    env = EnvRef("maze", "toolgym/Maze-v0", {"size": 3, "max_turns": 2})
    request = GroupRequest(env, SeedTasks().draw("train", 5), size=2)
    sent = GroupRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert sent == request
    config = RolloutConfig(SamplingParams(max_tokens=12, seed=0), max_turns=1)
    with Runtime() as runtime:  # the receiving side builds the env from the reference
        collector = RolloutCollector(engine, renderer, config, runtime.pool_for)
        (group,) = runtime.run(collector.collect([sent]))
        assert runtime.pools["maze"].ref == env
        with pytest.raises(ValueError, match="env name 'maze' is taken"):
            runtime.pool_for(EnvRef("maze", "toolgym/Maze-v0", {"size": 4}))
    assert (group.group_id, group.env_name, len(group.trajectories)) == ("maze:train:5", "maze", 2)
    assert all(t.env_id == "toolgym/Maze-v0" and t.steps for t in group.trajectories)
