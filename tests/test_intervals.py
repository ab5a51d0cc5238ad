"""The intervals every learning figure is printed with, against values worked by hand."""

from __future__ import annotations

import math

import pytest

from toolgym.intervals import item_wilson, mean_interval, paired_difference, percent, wilson


def test_wilson_is_right_at_the_edges_and_on_few_episodes():
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(11, 128) == pytest.approx((0.0487, 0.1473), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)  # nothing played: nothing known


def test_repeated_plays_of_an_item_narrow_a_rate_only_as_far_as_they_differ():
    once = [[1.0], [0.0], [1.0], [1.0], [0.0]]
    assert item_wilson(once) == wilson(3, 5)  # one play an item: Wilson's own
    # Items that always or never succeed: four plays each are worth one, 10 episodes not 40.
    alike = [[1.0] * 4] * 5 + [[0.0] * 4] * 5
    assert item_wilson(alike) == pytest.approx(wilson(5, 10))
    # Items alike in their rate (each succeeds in half its plays): every play counts.
    halves = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    assert item_wilson(halves) == pytest.approx((0.2152, 0.7848), abs=1e-4)  # Wilson on 8
    # Between: 9 of 16, the items' spread worth 5.4 episodes (worked by hand).
    mixed = [[1.0] * 4, [0.0] * 4, [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    assert item_wilson(mixed) == pytest.approx((0.2156, 0.8574), abs=1e-4)
    assert item_wilson([]) == (0.0, 1.0)


def test_a_mean_over_three_seeds_uses_students_t():
    mean, low, high = mean_interval([1.6, 7.8, 3.9])
    assert mean == pytest.approx(4.4333, abs=1e-4)
    assert (low, high) == pytest.approx((-3.3531, 12.2198), abs=1e-3)
    one = mean_interval([0.5])
    assert one[0] == 0.5 and one[1:] == (-math.inf, math.inf)  # one seed measures no spread
    with pytest.raises(ValueError):
        mean_interval([])


def test_a_paired_difference_cancels_what_the_items_share():
    before, after = [0, 0, 1, 1, 0, 1, 0, 0], [1, 0, 1, 1, 1, 1, 0, 1]
    mean, low, high = paired_difference(after, before)
    assert mean == pytest.approx(3 / 8) and low < mean < high
    with pytest.raises(ValueError, match="pair them by item"):
        paired_difference([1, 0], [1])
    assert percent(0.125, 0.077, 0.195) == "12.5% (7.7-19.5)"
