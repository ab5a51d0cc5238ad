"""`toolgym model pretrain`: a built-in size trained from scratch for copying, with a tokenizer
trained on the generated corpus (copying, recall, tool-call syntax, chat turns, named envs'
transcripts), so names, ids and numbers do not shatter into bytes.

Two phases (`agents/models/corpus/repeats.py` says why): a copy warm-up on short periodic rows at a
constant learning rate, then full-length rows, periodic with periods up to the row length
(and corpus text, by `periodic_share`), on a cosine schedule. Next-token loss; the first
period of a periodic row is not learned.

Deterministic from the seed on a given machine: the corpus, the tokenizer, the initial weights
and the batch order all derive from it.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from toolgym.agents.models.corpus import CorpusSpec, documents, packed
from toolgym.agents.models.corpus.repeats import periodic_row
from toolgym.agents.models.fresh import (
    ARCHS,
    SIZES,
    SPECIAL_TOKENS,
    build_tokenizer,
    new_model,
    save_model,
)
from toolgym.errors import ConfigError, RunFailedError, did_you_mean
from toolgym.training.schedule import lr_factor
from toolgym.training.update.optim_step import adamw, optimizer_step

RECORD = "toolgym_pretrain.json"
"""Written next to the model: the settings, the loss curve, the wall clock and the probes."""

LR_BY_SIZE = {"tiny": 3e-3, "mini": 1e-3, "small": 5e-4}
"""Peak learning rate per size when none is given. Wider models need less: mini at tiny's
3e-3 stays at chance loss throughout, at 1e-3 it copies from 500 tokens back. Small's value
follows the trend and has not been measured."""


@dataclass
class PretrainConfig:
    size: str = "tiny"
    arch: str = "qwen2"
    steps: int = 1400
    seq_len: int = 640
    batch_size: int = 8
    lr: float | None = None
    """Peak learning rate; None takes the size's (`LR_BY_SIZE`)."""
    warmup_steps: int = 0
    """Warm-up of the main phase's cosine schedule (the copy warm-up runs before it)."""
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    envs: Sequence[str] = ()
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokenizer_docs: int = 3000
    """Corpus documents the tokenizer is trained on (from a stream of its own)."""
    copy_warmup_steps: int = 400
    """Steps on short periodic random rows before any text, so the copy circuit forms first
    (`agents/models/corpus/repeats.py`); at a constant learning rate."""
    copy_warmup_seq_len: int = 128
    copy_warmup_batch_size: int = 32
    periodic_share: float = 1.0
    """Share of the main phase's rows that are periodic (the rest is the corpus), with periods
    up to the row length and alphabets down to `periodic_min_alphabet` tokens: they stretch
    the circuit to the whole context and make it match on more than one token. On the tiny
    size any share of text measured so far erodes copying from far back (15% text: 0% at 500
    tokens), so by default the corpus trains the tokenizer and the rows are all periodic."""
    periodic_min_alphabet: int = 16

    def __post_init__(self) -> None:
        if self.lr is None:
            self.lr = LR_BY_SIZE.get(self.size)

    def check(self) -> None:
        if self.arch not in ARCHS:
            raise ConfigError(
                f"unknown arch '{self.arch}'.{did_you_mean(self.arch, ARCHS)} Choose from: {', '.join(ARCHS)}"
            )
        if self.size not in SIZES:
            raise ConfigError(
                f"unknown size '{self.size}'.{did_you_mean(self.size, SIZES)} Choose from: {', '.join(SIZES)}"
            )
        for name, value, least in (("steps", self.steps, 1), ("seq_len", self.seq_len, 32),
                                   ("batch_size", self.batch_size, 1), ("tokenizer_docs", self.tokenizer_docs, 10)):  # fmt: skip
            if value < least:
                raise ConfigError(f"{name} must be at least {least}, got {value}")
        if not 0 <= self.copy_warmup_steps < self.steps:
            raise ConfigError(
                f"copy_warmup_steps must be in [0, steps), got {self.copy_warmup_steps}"
            )
        if not 0 <= self.periodic_share <= 1:
            raise ConfigError(f"periodic_share must be in [0, 1], got {self.periodic_share}")
        if not 2 <= self.periodic_min_alphabet <= SIZES[self.size].vocab_size - len(SPECIAL_TOKENS):
            raise ConfigError(
                f"periodic_min_alphabet must be in [2, vocab size], got {self.periodic_min_alphabet}"
            )
        if self.lr is None or not 0 < self.lr < 1:
            raise ConfigError(f"lr must be in (0, 1), got {self.lr}")


@dataclass
class PretrainResult:
    path: Path
    losses: list[float]
    seconds: float
    parameters: int
    model: Any
    tokenizer: Any


def pretrain(out: str | Path, config: PretrainConfig,
             on_step: Callable[[int, float], None] | None = None) -> PretrainResult:  # fmt: skip
    """Build, train and save a model to `out`; `on_step(step, loss)` after each update."""
    config.check()
    torch.manual_seed(config.seed)
    start = time.perf_counter()
    spec = CorpusSpec(seed=config.seed, envs=list(config.envs), env_kwargs=config.env_kwargs)
    tokenizer_spec = CorpusSpec(**{**asdict(spec), "seed": config.seed + 1_000_003})
    tokenizer = build_tokenizer(
        SIZES[config.size].vocab_size,
        itertools.islice(documents(tokenizer_spec), config.tokenizer_docs),
    )
    model = new_model(tokenizer, config.arch, config.size, config.seed)
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    sequences = packed(documents(spec), encode, eos, config.seq_len)
    peak_lr = float(config.lr or 0)  # check() refused a missing one
    optimizer = adamw(model, peak_lr, config.weight_decay, betas=(0.9, 0.95))
    rows = random.Random(f"periodic-{config.seed}")
    low, high = len(SPECIAL_TOKENS), tokenizer.vocab_size

    def row() -> tuple[list[int], list[int]]:
        if rows.random() < config.periodic_share:
            return periodic_row(rows, config.seq_len, low, high, max_period=config.seq_len - 8,
                                min_alphabet=config.periodic_min_alphabet)  # fmt: skip
        text = next(sequences)
        return text, text

    def batch_at(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if step < config.copy_warmup_steps:
            batch = [periodic_row(rows, config.copy_warmup_seq_len, low, high)
                     for _ in range(config.copy_warmup_batch_size)]  # fmt: skip
        else:
            batch = [row() for _ in range(config.batch_size)]
        return torch.tensor([b[0] for b in batch]), torch.tensor([b[1] for b in batch])

    losses: list[float] = []
    model.train()
    text_steps = config.steps - config.copy_warmup_steps
    for step in range(config.steps):
        text_step = step - config.copy_warmup_steps
        factor = 1.0 if text_step < 0 else lr_factor(
            text_step, text_steps, "cosine", config.warmup_steps, config.min_lr_ratio
        )  # fmt: skip
        ids, labels = batch_at(step)

        def accumulate(ids: torch.Tensor = ids, labels: torch.Tensor = labels) -> float:
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            return float(loss.detach())

        done = optimizer_step(
            optimizer, model.parameters(), accumulate, config.grad_clip, lr=peak_lr * factor
        )
        if not done.stepped:
            raise RunFailedError(
                f"pretraining step {step}: the loss ({done.loss}) or gradient norm "
                f"({done.grad_norm}) is not finite"
            )
        losses.append(done.loss)
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    seconds = time.perf_counter() - start
    path = save_model(model, tokenizer, out)
    parameters = sum(p.numel() for p in model.parameters())
    record = {"config": asdict(config), "seconds": round(seconds, 1), "parameters": parameters,
              "losses": [round(x, 4) for x in losses]}  # fmt: skip
    (path / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return PretrainResult(path, losses, seconds, parameters, model, tokenizer)
