"""Every proposer reward rule against values worked by hand."""

from __future__ import annotations

import re

import pytest

from toolgym.errors import ConfigError
from toolgym.training.selfplay import proposer_rule

CASES = {
    # solve rate:      never, 1 of 4, half, 3 of 4, always
    "learnability": [0.0, 0.75, 0.5, 0.25, 0.0],
    "one_minus": [1.0, 0.75, 0.5, 0.25, 0.0],
    "band(0.25, 0.5)": [0.0, 1.0, 1.0, 0.0, 0.0],
    " band( 0 ,1 ) ": [1.0, 1.0, 1.0, 1.0, 1.0],
}
RATES = [0.0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("spec", CASES)
def test_each_rule_pays_what_it_says(spec):
    rule = proposer_rule(spec)
    assert [rule(rate) for rate in RATES] == CASES[spec]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("learnabilty", "Did you mean: learnability"),
        ("band(0.5)", "band(lo, hi), two numbers"),
        ("band(a, b)", "band(lo, hi), two numbers"),
        ("band(0.8, 0.2)", "0 <= lo <= hi <= 1"),
        ("one_minus(1)", "one_minus, no arguments"),
        ("azr", "unknown proposer reward"),
        ("one minus", "give a name, or band(lo, hi)"),
    ],
)
def test_a_bad_spec_is_refused_with_its_reason(spec, why):
    with pytest.raises(ConfigError, match=re.escape(why)):
        proposer_rule(spec)
