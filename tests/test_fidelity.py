"""Token fidelity (training/update/fidelity.py): the gap between the engine's log-probabilities and
the learner's over the trained tokens, and the warning a run gives when it grows."""

from __future__ import annotations

import logging

import pytest
import torch

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.update.fidelity import FidelityMeter, warn_on_fidelity


def test_the_gap_is_measured_over_the_trained_tokens_only():
    meter = FidelityMeter()
    learner = torch.tensor([[-1.0, -2.0, -3.0, -9.0]])
    behaviour = torch.tensor([[-1.0, -2.5, -3.05, -1.0]])
    meter.add(learner, behaviour, torch.tensor([[1, 1, 1, 0]]))  # the last token is a prompt's
    metrics = meter.metrics(None)
    assert metrics["fidelity_gap_mean"] == pytest.approx((0 + 0.5 + 0.05) / 3)
    assert metrics["fidelity_gap_max"] == pytest.approx(0.5)
    assert metrics["fidelity_over"] == pytest.approx(1 / 3)  # 0.5 is past 0.1, 0.05 is not
    assert FidelityMeter().metrics(None) == {}  # nothing trained: nothing reported


def test_a_run_warns_when_the_engine_drifts_and_names_the_correction(caplog):
    on_policy = load_config(TrainConfig, None, ["model=unused"])
    with caplog.at_level(logging.WARNING):
        warn_on_fidelity(3, {"fidelity_gap_mean": 0.01, "fidelity_over": 0.0}, on_policy)
        assert not caplog.records
        warn_on_fidelity(4, {"fidelity_gap_mean": 0.2, "fidelity_over": 0.4}, on_policy)
    (record,) = caplog.records
    assert (
        "step 4: the engine's log-probabilities are 0.200 nats from the learner's" in record.message
    )
    assert "(40% of tokens past 0.10); loss.mode=truncated-is corrects for it" in record.message
