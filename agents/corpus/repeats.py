"""Periodic random token sequences: the fastest way found to give a small model a copy circuit.

A row is a random run of tokens repeated with a period drawn per row, so after the first
period every token is predictable, and only by finding the current token's earlier
occurrence and reading what followed it (a fixed offset cannot work when the period varies).
On the tiny size this circuit (an induction head) forms within a few hundred steps on these
rows, while thousands of steps of generated text alone never formed it: the text's own
statistics give the loss an easier descent. Rows of this kind stay mixed into the text
afterwards so the circuit is kept at the training length.
"""

from __future__ import annotations

import random


def periodic_row(
    rng: random.Random, length: int, low: int, high: int, min_period: int = 16
) -> list[int]:
    """`length` token ids from [low, high), repeating with a period in [min_period, length/2]."""
    period = rng.randint(min_period, max(min_period, length // 2))
    run = [rng.randrange(low, high) for _ in range(period)]
    return (run * (length // period + 1))[:length]
