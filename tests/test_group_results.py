"""Episodes hand back typed results beside their steps, and a group builder can make a
step whose episodes depend on each other: a proposer's episode writes a task, solvers play
it, and the proposer's reward waits on their results, in sync and in async mode."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel
from test_async_training import Recording, config

import fixture_envs  # noqa: F401 (registers fixture/Propose-v0)
from toolgym.agents.collector import GroupRequest, RolloutCollector, pools_of, requests_for
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.trajectory import EpisodeEnd, ResultError
from toolgym.envs import EnvPool, EnvRef, SeedTasks
from toolgym.envs.registration import make
from toolgym.envs.resources import Resources
from toolgym.envs.tasks import TaskDraw

PAID = "rewards=[{source: env}, {source: proposer}]"
"""The env's rewards, and the proposer's score the builder records."""


class Proposal(BaseModel):
    seed: int


class ProposeThenSolve:
    """Each step: one proposer group of 2; each proposal is solved by a group of 2 on Maze;
    a proposer is rewarded by how many of its solvers failed (its recorded `proposer` score)."""

    def __init__(self, maze: EnvRef) -> None:
        self.proposer = EnvRef("propose", "fixture/Propose-v0")
        self.maze, self.proposed = maze, 0

    async def build(self, ctx):
        ask = GroupRequest(self.proposer, SeedTasks().draw("train", ctx.step), 2, "proposer")
        (proposals,) = await ctx.collect([ask])
        groups = [proposals]
        for t in proposals.trajectories:
            if t.masked:
                continue
            (proposal,) = t.results_as(Proposal)
            self.proposed += 1
            draw = TaskDraw("train", 10_000 + self.proposed, {"seed": proposal.seed}, proposal.seed)
            (solved,) = await ctx.collect([GroupRequest(self.maze, draw, 2, "solver")])
            solved.group_id = f"solve:{self.proposed}"  # the builder names its groups
            failed = sum(not s.masked and s.total_reward <= 0 for s in solved.trajectories)
            t.record("proposer", failed / 2)  # waits on the solvers' group
            groups.append(solved)
        return groups

    def state_dict(self):
        return {"proposed": self.proposed}

    def load_state_dict(self, state):
        self.proposed = state["proposed"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_builder_reads_typed_results_and_rewards_a_proposer_by_its_solvers(
    tool_calling_model_dir, tmp_path, mode
):
    settings = config(tool_calling_model_dir, tmp_path, "steps=2", f"mode={mode}", PAID)
    builder = ProposeThenSolve(settings.mixture[0].ref)
    trainer = Recording(settings, groups=builder)
    metrics = trainer.run()
    # two proposals a step; async mode also started the next steps' while training
    assert builder.proposed == 4 if mode == "sync" else builder.proposed >= 4
    for step in trainer.trained:
        proposers = [g for g in step["groups"] if g.startswith("propose:")]
        assert len(proposers) == 1 and len(step["groups"]) == 3
    assert all(m["env_steps"] > 2 for m in metrics)
    assert all("reward/proposer" in m for m in metrics)


def test_results_are_plain_bounded_json_and_read_typed(tool_calling_model_dir):
    engine = HFEngine(tool_calling_model_dir)
    renderer = ChatRenderer(engine.tokenizer)
    config = RolloutConfig(max_turns=1)

    async def play(result):
        pool = EnvPool(lambda: make("fixture/Propose-v0", result=result), Resources({}),
                       name="propose", env_id="fixture/Propose-v0")  # fmt: skip
        collector = RolloutCollector(engine, renderer, config, pools_of(pool))
        (group,) = await collector.collect(requests_for(pool.ref, [SeedTasks().draw("train", 0)]))
        await pool.aclose()
        return group.trajectories[0]

    async def all_of_them():
        out = [await play(r) for r in (None, {"seed": "seven"}, "huge", "object")]
        await engine.aclose()
        return out

    good, mistyped, huge, unserialisable = asyncio.run(all_of_them())
    (proposal,) = good.results_as(Proposal)
    assert 500 <= proposal.seed < 505 and good.steps[0].result == {"seed": proposal.seed}
    with pytest.raises(ResultError, match="step 0: its result is not a Proposal"):
        mistyped.results_as(Proposal)
    for bad, why in ((huge, "characters"), (unserialisable, "not JSON data")):
        assert bad.end is EpisodeEnd.ENV_FAILED and why in bad.infra_error


def test_a_builder_mixture_shares_each_steps_groups_by_weight(tool_calling_model_dir, tmp_path):
    from toolgym.training.groups import BuilderMixture, TaskGroups

    settings = config(tool_calling_model_dir, tmp_path, "steps=2", "rollout.tasks_per_step=2", PAID)
    maze = settings.mixture[0]
    tasks = TaskGroups([maze], {maze.label: SeedTasks()}, settings.seed, 3, tasks_per_step=2)
    selfplay = ProposeThenSolve(maze.ref)
    mixture = BuilderMixture([("tasks", tasks, 1.0), ("selfplay", selfplay, 1.0)])
    assert [mixture.shares(step, 2) for step in range(4)] == [[1, 1]] * 4
    trainer = Recording(settings, groups=mixture)
    trainer.run()
    for step in trainer.trained:  # one task group, and one proposer group with its solvers
        assert sum(g.startswith(f"{maze.label}:train:") for g in step["groups"]) == 1
        assert sum(g.startswith("propose:") for g in step["groups"]) == 1
    ids = [g for step in trainer.trained for g in step["groups"]]
    assert len(ids) == len(set(ids))
    assert mixture.state_dict() == {"tasks": {}, "selfplay": {"proposed": 4}}


class Nothing:
    """A builder that makes no groups."""

    async def build(self, ctx):
        return []

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_with_no_groups_stops_the_run_instead_of_training_on_nothing(
    tool_calling_model_dir, tmp_path, mode
):
    from toolgym.errors import RunFailedError

    trainer = Recording(config(tool_calling_model_dir, tmp_path, f"mode={mode}"), groups=Nothing())
    with pytest.raises(RunFailedError, match="training step 1: the group builder made no episodes"):
        trainer.run()
