"""The self-play task pool: references kept, capacity, policies, filling a batch, resume."""

from __future__ import annotations

import json

import pytest

from toolgym.envs.tasks.proposed import ProposedTask, Provenance
from toolgym.errors import ConfigError
from toolgym.training.selfplay.pool import TaskPool


def task(i, proposer=None):
    provenance = Provenance(proposer=proposer, policy_version=i) if proposer else None
    return ProposedTask(kind="qa", instruction=f"question number {i}?", answer=str(i),
                        provenance=provenance)  # fmt: skip


def test_references_stay_and_proposals_are_capped_oldest_first():
    pool = TaskPool([task(0), task(1)], capacity=3)
    pool.add([task(i, f"p{i}") for i in range(10, 15)])
    assert [t.answer for t in pool.tasks] == ["0", "1", "12", "13", "14"]
    assert len(pool) == 5


def test_policies_are_a_function_of_the_step():
    pool = TaskPool([task(i) for i in range(20)], policy="uniform", seed=3)
    assert pool.show(4, step=7) == pool.show(4, step=7) != pool.show(4, step=8)
    assert len(set(t.answer for t in pool.show(4, step=7))) == 4  # no repeats in one context
    # each proposer of a step draws its own (Absolute Zero draws references per prompt)
    assert len({tuple(t.answer for t in pool.show(4, 7, proposal=i)) for i in range(4)}) == 4
    newest = TaskPool([task(0)], policy="recent")
    newest.add([task(1, "p1"), task(2, "p2")])
    assert [t.answer for t in newest.show(2, step=0)] == ["2", "1"]
    with pytest.raises(ConfigError, match="Did you mean: recent"):
        TaskPool([], policy="recnt")


def test_a_batch_is_filled_with_past_proposals_newest_first_then_references():
    pool = TaskPool([task(0), task(1)])
    assert [(source, t.answer) for source, t in pool.fill(3)] == [
        ("reference", "0"),
        ("reference", "1"),
        ("reference", "0"),
    ]
    pool.add([task(5, "p5"), task(6, "p6"), task(7, "p7")])
    assert [t.answer for _, t in pool.fill(2)] == ["7", "6"]  # enough proposals: no reference
    assert [t.answer for _, t in pool.fill(6)] == ["7", "6", "5", "0", "1", "7"]
    assert TaskPool([]).fill(5) == [] and pool.fill(0) == []


def test_a_resumed_pool_holds_what_it_held():
    pool = TaskPool([task(0)], capacity=8, seed=1)
    pool.add([task(5, "p5"), task(6, "p6")])
    saved = json.loads(json.dumps(pool.state_dict()))  # as the checkpoint keeps it
    resumed = TaskPool([task(0)], capacity=8, seed=1)
    resumed.load_state_dict(saved)
    assert resumed.tasks == pool.tasks and resumed.show(2, 4) == pool.show(2, 4)
    assert resumed.proposed[0].provenance == Provenance(proposer="p5", policy_version=5)
