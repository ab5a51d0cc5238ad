"""Probes of what pretraining taught: copying a span and recalling a key's value from far back.

Both are built in token space from held-out generated text (a probe seed stream no corpus
draws), so the distance between the span and the point that needs it is exact:

- copy: a line holding a span of `cue + span_tokens` tokens, filler after it, then
  "Again: " and the span's first `cue` tokens; the model must write the next `span_tokens`
  tokens greedily. Distance: tokens from the span's start to the end of the context.
- recall: `key: value` records, the asked one first and filler records after it, then
  "Q: key?" and "A:"; the model must write the value. Distance as for copy.

A probe counts only when every predicted token is right.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolgym.agents.models.corpus.kinds import copy as copy_kind
from toolgym.agents.models.corpus.strings import Strings

PROBE_SEED_OFFSET = 7_919_000_000
"""Probe streams are seeded far from any corpus seed, so a probe never repeats training text."""


@dataclass(frozen=True)
class ProbeResult:
    kind: str
    distance: int
    accuracy: float
    """Share of probes whose every predicted token was right."""
    token_accuracy: float
    n: int


def copy_probe(strings: Strings, encode: Callable[[str], list[int]], distance: int,
               span_tokens: int = 8, cue: int = 2) -> tuple[list[int], list[int]]:  # fmt: skip
    """(context ids, the ids the model must write)."""
    while True:
        span_ids = encode(" ".join(strings.value().strip('"') for _ in range(6)))
        if len(span_ids) >= span_tokens + cue:
            break
    span_ids = span_ids[: span_tokens + cue]
    head = encode("Quote: ")
    tail = encode("\nAgain: ") + span_ids[:cue]
    filler = _filler(strings, encode, distance - len(span_ids) - len(tail), span_ids[:cue])
    return head + span_ids + filler + tail, span_ids[cue:]


def recall_probe(strings: Strings, encode: Callable[[str], list[int]], distance: int,
                 span_tokens: int = 8) -> tuple[list[int], list[int]]:  # fmt: skip
    key = strings.ident()
    while True:
        value_ids = encode(" " + " ".join(strings.value().strip('"') for _ in range(4)))
        if len(value_ids) >= span_tokens:
            break
    value_ids = value_ids[:span_tokens]
    record = encode(f"\n{key}:") + value_ids
    question = encode(f"\nQ: {key}?\nA:")
    filler = _filler(strings, encode, distance - len(record) - len(question), encode(key)[:2])
    return record + filler + question, value_ids


def _filler(strings: Strings, encode: Callable[[str], list[int]], n: int,
            avoid: list[int]) -> list[int]:  # fmt: skip
    """Exactly `n` tokens of generated text in which the cue `avoid` never occurs."""
    ids: list[int] = []
    while len(ids) < n:
        ids += encode("\n" + copy_kind.document(strings, 200))
        ids = _strip(ids[:n], avoid)
    return ids[:n]


def _strip(ids: list[int], avoid: list[int]) -> list[int]:
    k = len(avoid)
    for i in range(len(ids) - k + 1):
        if ids[i : i + k] == avoid:
            return ids[:i]
    return ids


PROBES = {"copy": copy_probe, "recall": recall_probe}


def run_probes(model: Any, tokenizer: Any, distances: Sequence[int] = (100, 250, 500),
               n: int = 100, seed: int = 0, batch_size: int = 25) -> list[ProbeResult]:  # fmt: skip
    """Greedy accuracy of each probe kind at each distance over `n` held-out contexts."""
    import torch

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    results = []
    model.eval()
    for kind, make in PROBES.items():
        for distance in distances:
            strings = Strings(random.Random(f"probe-{kind}-{distance}-{seed + PROBE_SEED_OFFSET}"))
            cases = [make(strings, encode, distance) for _ in range(n)]
            right, tokens = 0, 0
            for start in range(0, n, batch_size):
                chunk = cases[start : start + batch_size]
                width = max(len(c) for c, _ in chunk)
                want = len(chunk[0][1])
                pad = tokenizer.pad_token_id
                ids = torch.tensor([[pad] * (width - len(c)) + c for c, _ in chunk])
                mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c, _ in chunk])
                with torch.no_grad():
                    out = model.generate(
                        input_ids=ids, attention_mask=mask, max_new_tokens=want, do_sample=False,
                        pad_token_id=pad, eos_token_id=None,
                    )  # fmt: skip
                for row, (_, target) in zip(
                    out[:, width : width + want].tolist(), chunk, strict=False
                ):
                    right += row == target
                    tokens += sum(a == b for a, b in zip(row, target, strict=False))
            results.append(ProbeResult(kind, distance, right / n, tokens / (n * want), n))
    return results
