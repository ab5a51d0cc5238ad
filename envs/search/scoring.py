"""Answer scores for search tasks: exact match and token F1 after SQuAD's normalisation
(lower case, no punctuation, no articles a/an/the, single spaces), best over gold aliases."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    guess = normalize_answer(prediction)
    return float(any(guess == normalize_answer(g) for g in golds))


def f1(prediction: str, golds: Iterable[str]) -> float:
    """Best token-overlap F1 between the prediction and any gold answer."""
    return max((_f1(normalize_answer(prediction), normalize_answer(g)) for g in golds), default=0.0)


def _f1(prediction: str, gold: str) -> float:
    guess, truth = prediction.split(), gold.split()
    if not guess or not truth:
        return float(guess == truth)
    common = sum((Counter(guess) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(guess), common / len(truth)
    return 2 * precision * recall / (precision + recall)
