"""Text-game self-play on the real pieces: the proposer env hands back a spec TextWorld built
(planned and compiled in the game worker), the solvers' TextWorld-v0 plays that game from the
cache and wins it with its walkthrough; hostile specs (broken JSON, a door no key opens, a
goal the planner cannot reach, a 10,000-room map, a megabyte of text) are rejected with their
reason within bounded time; spec_maker's specs, which seed the pool and the scripted
proposer, all build and are won."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import toolgym
from toolgym.envs.ref import EnvRef
from toolgym.envs.textworld.spec_maker import random_spec
from toolgym.training.selfplay.domains.textworld import TextWorldDomain
from toolgym.training.selfplay.validation import read_task, validate

pytestmark = pytest.mark.timeout(600)

DOMAIN = TextWorldDomain(EnvRef("textworld", "toolgym/TextWorld-v0", {}))


def propose(action: str, seed: int = 3):
    """The proposer's one-turn episode `action`: whether it ended, and the task handed back."""

    async def play():
        env = toolgym.make("toolgym/ProposeTextWorld-v0")
        try:
            await env.areset(seed=seed, options={"task": {"proposal": "p0", "examples": []}})
            _, _, done, _, info = await env.astep(action)
        finally:
            await env.aclose()
        return done, info.get("result")

    return asyncio.run(play())


def verdict(result) -> str | None:
    from toolgym.agents.trajectory import Step, Trajectory

    calls = [{"name": "spec", "arguments": {}}]
    step = Step(0, 1, [0.0], "x", [], 0.0, 0, 1, tool_calls=calls, result=result)
    proposal = read_task(Trajectory("p0:0", steps=[step]))
    validate([proposal], DOMAIN.stages())
    return proposal.rejected


async def win(task: dict) -> tuple[float, bool]:
    """The solver env's return and end on `task`, playing its walkthrough."""
    env = toolgym.make("toolgym/TextWorld-v0")
    try:
        await env.areset(seed=0, options={"task": task})
        total, done = 0.0, False
        for command in env.unwrapped.walkthrough():
            _, reward, done, _, _ = await env.astep(f"<command>{command}</command>")
            total += reward
        return total, done
    finally:
        await env.aclose()


HEIST = {
    "name": "heist",
    "rooms": ["kitchen", "hall", "vault"],
    "start": "kitchen",
    "links": [
        {"from": "kitchen", "direction": "east", "to": "hall"},
        {"from": "hall", "direction": "north", "to": "vault",
         "door": {"name": "iron door", "state": "locked", "key": "iron key"}},
    ],
    "containers": [{"name": "chest", "room": "kitchen"}],
    "objects": [{"name": "iron key", "kind": "key", "in": "chest"},
                {"name": "gold coin", "in": "vault"}],
    "goal": [{"holding": "gold coin"}],
}  # fmt: skip


def test_a_proposed_game_is_built_once_and_its_solvers_play_it():
    done, result = propose(f"<spec>{json.dumps(HEIST)}</spec>")
    assert done and result["kind"] == "textworld"
    assert result["check"]["steps"] == 7 and result["check"]["error"] is None
    assert json.loads(result["instruction"])["name"] == "heist"
    assert verdict(result) is None
    from toolgym.envs.tasks.proposed import ProposedTask

    task = DOMAIN.solver_task(ProposedTask.model_validate(result))
    assert asyncio.run(win(task)) == (1.0, True)


LOCKED_FOR_GOOD = {**HEIST, "objects": [{"name": "iron key", "kind": "key", "in": "vault"},
                                        {"name": "gold coin", "in": "vault"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ('<spec>{"name": "x", "rooms": [</spec>', "built: Expecting value"),
        ('<spec>{"name": "no way", "rooms": ["porch", "hall"], "start": "porch", "links": '
         '[{"from": "porch", "direction": "north", "to": "hall", "door": {"name": "front door", '
         '"state": "locked"}}], "goal": [{"at": "hall"}]}</spec>',
         "built: the door 'front door' is locked and no key opens it"),
        (f"<spec>{json.dumps(LOCKED_FOR_GOOD)}</spec>",
         "built: the goal cannot be reached from the start"),
        (f"<spec>{json.dumps({**HEIST, 'goal': [{'at': 'kitchen'}]})}</spec>",
         "built: the goal already holds at the start"),
        ('<spec>{"name": "<tool_call>", "rooms": ["hall"], "start": "hall", '
         '"goal": [{"at": "hall"}]}</spec>', "built: name: Value error"),
    ],
    ids=["broken JSON", "no key", "key locked away", "won at the start", "markup in a name"],
)  # fmt: skip
def test_hostile_specs_are_rejected_with_their_reason(action, reason):
    done, result = propose(action)
    assert done
    assert verdict(result).startswith(reason), verdict(result)


def test_a_huge_map_or_a_megabyte_is_refused_in_bounded_time():
    rooms = [f"room {i}" for i in range(10_000)]
    huge = {"name": "sprawl", "rooms": rooms, "start": "room 0", "goal": [{"at": "room 9"}]}
    start = time.perf_counter()
    for text in (json.dumps(huge), "x" * 1_000_000):
        done, result = propose(f"<spec>{text}</spec>")
        assert done and len(json.dumps(result)) < 8 * 1024  # bounded before it travels
        assert verdict(result) == "built: the spec is over 2000 characters"
    assert time.perf_counter() - start < 60


def test_spec_maker_games_build_and_are_won_and_seed_the_domain_s_references():
    references = DOMAIN.references(3)
    assert len({r.instruction for r in references}) == 3

    async def play_all() -> list:
        return [await win({"spec": random_spec(seed)}) for seed in range(12)]

    assert asyncio.run(play_all()) == [(1.0, True)] * 12
    assert asyncio.run(win(DOMAIN.solver_task(references[0]))) == (1.0, True)
