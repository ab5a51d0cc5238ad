"""Proposer baselines against cases worked by hand."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from toolgym.training.selfplay.baselines import EMABaseline, partition_advantages


def test_each_partition_is_normalised_on_its_own_and_a_lone_sample_gets_zero(caplog):
    rewards = [1.0, 0.0, 0.5, 0.5, 0.9]
    keys = (
        [("search", "proposer", "qa")] * 2
        + [("code", "proposer", "deduction")] * 2
        + [("sql", "proposer", "query")]
    )
    with caplog.at_level(logging.WARNING):
        out = partition_advantages(rewards, keys)
    # (1, 0): mean 0.5, std 0.5 -> +1, -1; (0.5, 0.5): no spread -> 0, 0; a lone one -> 0
    np.testing.assert_allclose(out, [1.0, -1.0, 0.0, 0.0, 0.0], atol=1e-5)
    assert "('sql', 'proposer', 'query') holds one sample" in caplog.text
    centred = partition_advantages([3.0, 1.0, 2.0], ["a", "a", "a"], std_normalize=False)
    np.testing.assert_allclose(centred, [1.0, -1.0, 0.0])


def test_the_ema_baseline_starts_at_the_first_mean_and_follows_each_role():
    ema = EMABaseline(decay=0.5)
    np.testing.assert_allclose(ema.advantages("proposer", [1.0, 0.0]), [0.5, -0.5])  # baseline 0.5
    np.testing.assert_allclose(ema.advantages("proposer", [1.0, 1.0]), [0.5, 0.5])  # still 0.5
    assert ema.means["proposer"] == pytest.approx(0.75)  # 0.5 x 0.5 + 0.5 x 1.0
    np.testing.assert_allclose(ema.advantages("solver", [0.2]), [0.0])  # its own baseline
    restored = EMABaseline(decay=0.5)
    restored.load_state_dict(ema.state_dict())
    np.testing.assert_allclose(restored.advantages("proposer", [1.0]), [0.25])
    with pytest.raises(ValueError, match="0 <= decay < 1"):
        EMABaseline(decay=1.0)
