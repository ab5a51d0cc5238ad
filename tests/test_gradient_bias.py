"""Is a step's policy gradient biased when the policy decides when its episode ends? The
expectation over every batch the policy can play is computed exactly (bench/gradient_bias.py:
three turns of "go" or "stop", paid for going once then stopping), with toolgym's own
advantages and loss aggregation, and compared with the true gradient, worked by hand:

    J = p1 (1 - p2);  dJ/dtheta1 = p1 (1 - p1) (1 - p2),  dJ/dtheta2 = -p1 (1 - p2) p2,
    dJ/dtheta3 = 0;  at theta = (0.5, 0, -0.5): p1 = 0.622459, p2 = 0.5.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from gradient_bias import THETA, TURNS, VARIANTS, cosine, expected_gradient, true_gradient

P1, P2 = 1 / (1 + np.exp(-0.5)), 0.5
TRUTH = np.array([P1 * (1 - P1) * (1 - P2), -P1 * (1 - P2) * P2, 0.0])


def expected(batch, variant, mode):
    estimator, options = VARIANTS[variant]
    return expected_gradient(THETA, batch, estimator, options, mode)


def test_the_true_gradient_is_the_one_worked_by_hand():
    np.testing.assert_allclose(true_gradient(THETA), TRUTH, atol=1e-12)


@pytest.mark.parametrize("batch", [2, 3])
def test_a_constant_denominator_with_a_baseline_from_the_others_is_exactly_unbiased(batch):
    # RLOO: E[(R_i - mean of the others) sum_t score_t] = dJ; each sequence's token sum over
    # a constant (batch x the longest episode, 3 turns) scales it by 1 / (batch x 3) x batch
    np.testing.assert_allclose(expected(batch, "RLOO", "seq-mean-token-sum"), TRUTH / TURNS,
                               atol=1e-12)  # fmt: skip
    # GiGPO with the step level's leave-one-out baseline: episode term (1 - 1/G) dJ (its
    # group mean holds the episode's own return), step term dJ (reward-to-go, gamma 1)
    np.testing.assert_allclose(
        expected(batch, "GiGPO, step leave-one-out", "seq-mean-token-sum"),
        TRUTH * (1 - 1 / batch + 1) / TURNS, atol=1e-12,
    )  # fmt: skip


def test_a_per_sequence_token_mean_is_biased_whatever_the_batch():
    """Each episode's gradient over its own length: the policy chooses the length, so the
    weight depends on the actions it scores, and more episodes do not wash it out."""
    for batch in (2, 3, 4):
        assert cosine(expected(batch, "RLOO", "seq-mean-token-mean"), TRUTH) == pytest.approx(
            0.9487, abs=1e-4
        )


def test_the_default_token_mean_is_biased_only_as_far_as_one_batch_is_small():
    """Over the step's token count, which holds each episode's own length: a bias of order
    one over the batch's episodes, which a run's hundreds of episodes make negligible."""
    cosines = [cosine(expected(b, "RLOO", "token-mean"), TRUTH) for b in (2, 3, 4)]
    assert cosines == pytest.approx([0.9900, 0.9949, 0.9970], abs=1e-4)
    assert 1 - cosines[2] < (1 - cosines[0]) / 3


def test_gigpo_s_anchor_mean_holds_the_step_s_own_return_and_is_biased_in_small_groups():
    """The step level's group mean holds the step's own return (a weight 1 - 1/n for an anchor
    group of n, and n depends on how the others played) and a lone step gets 0: its gradient
    leans off the true one, less as groups grow."""
    cosines = [
        cosine(expected(b, "GiGPO (gamma 1, mean only)", "seq-mean-token-sum"), TRUTH)
        for b in (2, 3, 4)
    ]
    assert cosines == pytest.approx([0.9947, 0.9977, 0.9988], abs=1e-4)
