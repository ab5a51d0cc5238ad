"""EM and F1 under SQuAD normalisation, worked out by hand."""

from __future__ import annotations

import pytest

from toolgym.envs.search.scoring import exact_match, f1, normalize_answer


def test_normalisation_drops_case_punctuation_articles_and_extra_spaces():
    assert normalize_answer("  The  Eiffel-Tower, in Paris! ") == "eiffeltower in paris"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match_takes_the_best_alias():
    assert exact_match("the Nile", ["Nile River", "nile"]) == 1.0
    assert exact_match("Nile River basin", ["Nile River", "nile"]) == 0.0
    assert exact_match("anything", []) == 0.0


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("Marie Curie", ["marie curie"], 1.0),
        # 1 common token; precision 1/2, recall 1/3 -> 2 * (1/6) / (5/6) = 0.4
        ("Curie laboratory", ["Marie Sklodowska Curie"], 0.4),
        ("Paris", ["London"], 0.0),
        ("", ["London"], 0.0),
        ("the", ["a"], 1.0),  # both normalise to nothing
        # repeated tokens count once per match: common = 1 ("red"); p = 1/3, r = 1/1 -> 0.5
        ("red red red", ["red"], 0.5),
        ("blue whale", ["whale", "blue whale shark"], 0.8),  # best of 2/3 and 0.8
    ],
)
def test_f1_by_hand(prediction, golds, expected):
    assert f1(prediction, golds) == pytest.approx(expected)
