"""The synthetic multi-hop world: deterministic, unambiguous, and every question's gold path
really leads through the documents to its answer."""

from __future__ import annotations

import pytest

from toolgym.envs.search.world import World


def test_same_seed_same_world_other_seed_other_world():
    assert World(3).documents() == World(3).documents()
    assert World(3).questions(5, hops=2) == World(3).questions(5, hops=2)
    assert World(3).documents() != World(4).documents()


def test_titles_are_unique_names():
    docs = World(0, "medium").documents()
    assert len(docs) > 2000
    assert len({d.title for d in docs}) == len(docs) == len({d.id for d in docs})


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_gold_hops_lead_to_the_answer(hops):
    world = World(1)
    docs = {d.id: d for d in world.documents()}
    questions = world.questions(20, hops=hops)
    assert len({q.question for q in questions}) == 20
    for q in questions:
        assert len(q.hops) == hops
        assert q.hops[0].entity in q.question  # the start is named, the rest must be found
        for before, after in zip(q.hops, q.hops[1:], strict=False):
            assert docs[before.doc_id].title == before.entity
            assert after.entity in docs[before.doc_id].body  # each document names the next
        assert q.answers[0] in docs[q.hops[-1].doc_id].body
        assert q.answers[0] not in q.question


def test_asking_for_more_questions_than_exist_is_a_clear_error():
    with pytest.raises(ValueError, match="only .* distinct 1-hop questions"):
        World(0, 10).questions(10_000, hops=1)
