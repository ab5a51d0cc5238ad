"""The pretraining corpus: generated kinds and env transcripts drawn by weight from one seed,
and the packing of documents into fixed-length token sequences."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolgym.agents.models.corpus.env_text import transcripts
from toolgym.agents.models.corpus.kinds import KINDS
from toolgym.agents.models.corpus.strings import Strings

DEFAULT_WEIGHTS = {"copy": 4.0, "recall": 2.0, "tool_chat": 2.0, "tag_chat": 1.0}


@dataclass
class CorpusSpec:
    seed: int = 0
    doc_chars: tuple[int, int] = (300, 4000)
    """Each generated document's length in characters is drawn from this range."""
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    envs: Sequence[str] = ()
    env_weight: float = 2.0
    """The weight of each named env's transcripts, next to the generated kinds'."""
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)


def documents(spec: CorpusSpec) -> Iterator[str]:
    """An endless, deterministic stream of documents."""
    rng = random.Random(f"corpus-{spec.seed}")
    strings = Strings(rng)
    sources = {name: w for name, w in spec.weights.items() if w > 0}
    streams = {
        env_id: transcripts(env_id, spec.seed, spec.env_kwargs.get(env_id)) for env_id in spec.envs
    }
    names = list(sources) + list(streams)
    weights = list(sources.values()) + [spec.env_weight] * len(streams)
    while True:
        name = rng.choices(names, weights)[0]
        if name in streams:
            yield next(streams[name])
        else:
            yield KINDS[name](strings, rng.randint(*spec.doc_chars))


def packed(docs: Iterator[str], encode: Any, eos_id: int, seq_len: int) -> Iterator[list[int]]:
    """Documents joined by `eos_id` and cut into `seq_len`-token sequences."""
    buffer: list[int] = []
    for doc in docs:
        buffer += encode(doc) + [eos_id]
        while len(buffer) >= seq_len:
            yield buffer[:seq_len]
            buffer = buffer[seq_len:]
