"""Execution match, case by case, each worked by hand."""

from __future__ import annotations

import datetime
import decimal

import pytest

from toolgym.envs.sql.grading import compare, gold_mode
from toolgym.envs.sql.results import QueryResult


def result(columns: str, *rows: tuple) -> QueryResult:
    return QueryResult(tuple(columns.split()), list(rows))


GOLD = result("name n", ("ann", 2), ("bob", 1), ("bob", 1))


@pytest.mark.parametrize(
    ("predicted", "mode", "matched"),
    [
        # the same rows in another order: equal unless order counts
        (result("name n", ("bob", 1), ("ann", 2), ("bob", 1)), "multiset", True),
        (result("name n", ("bob", 1), ("ann", 2), ("bob", 1)), "set", True),
        (result("name n", ("bob", 1), ("ann", 2), ("bob", 1)), "ordered", False),
        (result("name n", ("ann", 2), ("bob", 1), ("bob", 1)), "ordered", True),
        # one duplicate fewer: a multiset counts it, a set does not
        (result("name n", ("ann", 2), ("bob", 1)), "multiset", False),
        (result("name n", ("ann", 2), ("bob", 1)), "set", True),
        # columns swapped (and renamed): values decide, in every mode
        (result("count who", (2, "ann"), (1, "bob"), (1, "bob")), "ordered", True),
        (result("count who", (1, "bob"), (2, "ann"), (1, "bob")), "multiset", True),
        # a column more or fewer never matches
        (result("name", ("ann",), ("bob",), ("bob",)), "set", False),
        (result("name n x", ("ann", 2, 0), ("bob", 1, 0), ("bob", 1, 0)), "set", False),
        # a value differs
        (result("name n", ("ann", 2), ("bob", 1), ("bob", 3)), "multiset", False),
    ],
)
def test_modes_and_column_order(predicted, mode, matched):
    assert compare(predicted, GOLD, mode).matched is matched


def test_numbers_compare_by_value_across_types_and_rounding():
    gold = result("avg total", (0.3, decimal.Decimal("12.50")), (1.0, decimal.Decimal("3")))
    assert compare(result("a b", (0.1 + 0.2, 12.5), (1, 3)), gold, "ordered").matched
    assert not compare(result("a b", (0.31, 12.5), (1, 3)), gold, "ordered").matched
    # six significant digits: 1/3 written to 6 places is the same number, to 4 it is not
    third = result("x", (1 / 3,))
    assert compare(result("x", (0.333333,)), third, "set").matched
    assert not compare(result("x", (0.3333,)), third, "set").matched
    assert compare(result("flag", (True,)), result("flag", (1,)), "set").matched


def test_null_equals_null_and_nothing_else():
    gold = result("a b", (None, 1), ("x", None))
    assert compare(result("a b", ("x", None), (None, 1)), gold, "multiset").matched
    assert not compare(result("a b", ("", 1), ("x", None)), gold, "multiset").matched
    assert not compare(result("a b", (0, 1), ("x", None)), gold, "multiset").matched


def test_dates_equal_their_iso_text():
    gold = result("day", (datetime.date(2024, 3, 1),))
    assert compare(result("day", ("2024-03-01",)), gold, "set").matched
    assert not compare(result("day", ("2024-03-02",)), gold, "set").matched


def test_two_columns_with_equal_values_in_both_orders():
    # both columns hold {1, 2}: only the pairing that keeps each row decides
    gold = result("a b", (1, 2), (2, 1), (1, 1))
    assert compare(result("b a", (2, 1), (1, 2), (1, 1)), gold, "ordered").matched
    assert not compare(result("a b", (1, 2), (1, 2), (1, 1)), gold, "multiset").matched


def test_empty_results():
    assert compare(result("a"), result("a"), "ordered").matched
    assert not compare(result("a", (1,)), result("a"), "set").matched
    assert not compare(result("a"), result("a", (1,)), "set").matched


def test_a_truncated_result_never_matches():
    cut = QueryResult(("a",), [(1,)], truncated=True)
    assert not compare(cut, result("a", (1,)), "set").matched


@pytest.mark.parametrize(
    ("sql", "mode"),
    [
        ("SELECT name FROM t ORDER BY name", "ordered"),
        ("select name from t order\n  by 1 desc limit 3", "ordered"),
        ("SELECT name FROM (SELECT name FROM t ORDER BY age LIMIT 5)", "multiset"),
        ("SELECT name FROM t WHERE note = 'order by'", "multiset"),
        ("SELECT name FROM t -- order by name", "multiset"),
        ("SELECT border_bypass FROM t", "multiset"),
    ],
)
def test_gold_mode_reads_only_the_top_level_order_by(sql, mode):
    assert gold_mode(sql) == mode


def test_an_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="choose one of"):
        compare(GOLD, GOLD, "bag")  # type: ignore[arg-type]


def test_tables_as_the_model_reads_them():
    from toolgym.envs.sql.table import format_table

    shown = format_table(result("a b", (1, None), (2.5, b"\x00\x01"), (3, "x|y\nz")), 10, 1000)
    assert shown.splitlines() == ["a | b", "1 | NULL", "2.5 | <2 bytes>", "3 | x/y z", "(3 rows)"]
    many = QueryResult(("n",), [(i,) for i in range(50)], truncated=True)
    assert format_table(many, 5, 1000).endswith("4\n(5 of more than 50 rows shown)")
    assert format_table(result("n", *[(i,) for i in range(50)]), 5, 1000).endswith(
        "(5 of 50 rows shown)"
    )
    wide = format_table(
        QueryResult(tuple(f"column_{i}" for i in range(100)), [tuple(range(100))]), 5, 80
    )
    assert all(len(line) <= 80 for line in wide.splitlines()[:-1]) and "(0 of 1 rows shown)" in wide
    assert format_table(QueryResult(()), 5, 100) == "The statement returned no columns."
