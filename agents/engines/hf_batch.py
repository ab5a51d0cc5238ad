"""The running batch of the hf engine: continuous batching over a transformers KV cache.

Rows join between decode steps and leave as soon as they finish, so a short answer is
returned while longer ones are still being decoded, and a new request does not wait for the
whole batch to drain. Each row's tokens are contiguous and right-aligned in the batch's
cache; columns no row uses any more are cut when rows leave, so decoding attends over the
live tokens. A joining row that brings its episode's context (hf_contexts.py) prefills only
the tokens after it; joining rows prefill in chunks of similar new lengths, so a short
continuation is not padded to a long fresh prompt. A finishing row can leave its cache for
its episode's next turn.

Rows with images (vision-language models) are prefilled whole, with their pixels and the
model's 3-D rotary positions; after the prompt every position is text again, so decoding
goes on from each row's next position like any other row's.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from toolgym.agents.engines.base import Completion, SamplingParams
from toolgym.agents.engines.hf_contexts import Context
from toolgym.agents.vision import ImageInputs, vision_inputs, vision_token_ids


@dataclass
class Row:
    """One request's progress through the batch."""

    prompt: list[int]
    sampling: SamplingParams
    generator: torch.Generator
    stop_ids: set[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    tops: list[dict[int, float]] = field(default_factory=list)
    finish: str | None = None
    owner: Any = None
    """Whoever waits for this row (the engine's request record)."""
    on_token: Callable[[int], None] | None = None
    """Called from the worker thread with each sampled token (a server streaming it)."""
    images: ImageInputs | None = None
    """The pixels of the images in the prompt, in order (vision-language models)."""
    context: Context | None = None
    """The cache of the prompt's first tokens, left by the episode's last turn."""
    keep_context: bool = False
    """Leave this row's cache in `kept` when it finishes (its episode goes on)."""
    kept: Context | None = None
    stamp: Hashable = None
    """The weights the row was computed under (its kept context carries it)."""

    @property
    def reused(self) -> int:
        return len(self.context.tokens) if self.context is not None else 0


class RunningBatch:
    def __init__(self, model: Any, tokenizer: Any, pad_id: int) -> None:
        self.model, self.tokenizer, self.pad_id = model, tokenizer, pad_id
        self.unsampled = vision_token_ids(model.config)
        """Ids never sampled (image placeholders); log-probabilities stay the model's own."""
        self.device = next(model.parameters()).device
        """Where the model, its cache, mask and positions live; sampling runs on the cpu
        (the last position's logits come back as float32), with each row's own generator."""
        self.cache_keyword = cache_keyword(model)
        self.rows: list[Row] = []
        self.cache: Any = None
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.positions = torch.zeros((0, 1), dtype=torch.long, device=self.device)
        self.logits = torch.zeros((0, 0))

    def __len__(self) -> int:
        return len(self.rows)

    @torch.no_grad()
    def admit(self, rows: list[Row]) -> None:
        """Prefill `rows` and merge them into the batch. A row with a context prefills only
        the tokens after it; rows prefill in chunks of similar new lengths, so a short
        continuation is not padded to a long fresh prompt."""
        for chunk in prefill_chunks(rows):
            self._merge(chunk, *self._prefill(chunk))

    def _prefill(self, rows: list[Row]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chunk's cache, mask, last logits and next positions. Every row ends right-
        aligned: a row whose new tokens are fewer than the chunk's widest feeds some of its
        cached tokens again rather than leaving a gap, so each row's tokens stay contiguous."""
        width = max(len(r.prompt) - r.reused for r in rows)
        past = [max(len(r.prompt) - width, 0) for r in rows]
        past_width = max(past)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), past_width + width), dtype=torch.long)
        for i, (r, p) in enumerate(zip(rows, past, strict=True)):
            fed = r.prompt[p:]
            ids[i, width - len(fed) :] = torch.tensor(fed)
            mask[i, past_width - p : past_width] = 1
            mask[i, past_width + width - len(fed) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, past_width:]
        inputs: dict[str, Any] = {"position_ids": positions}
        images = ImageInputs.join([r.images for r in rows])
        if images is not None:  # rows with images have no context: past_width is 0
            inputs = vision_inputs(self.model, ids, mask, images.to(self.device))
        if past_width:
            inputs[self.cache_keyword] = _past_cache(rows, past, past_width)
        out = self.model(
            input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1, **inputs
        )
        logits = out.logits[:, -1, :].float().cpu()
        following = inputs["position_ids"].reshape(-1, *ids.shape).amax(dim=(0, 2)) + 1
        return returned_cache(out), mask, logits, following.unsqueeze(-1)

    def _merge(
        self, rows: list[Row], cache: Any, mask: torch.Tensor, logits: torch.Tensor,
        following: torch.Tensor,
    ) -> None:  # fmt: skip
        if not self.rows:
            self.cache, self.mask, self.logits, self.positions = cache, mask, logits, following
        else:
            width = max(self.mask.shape[1], mask.shape[1])
            for mine, theirs in zip(self.cache.layers, cache.layers, strict=True):
                mine.keys = torch.cat(
                    [_left_pad(mine.keys, width, 2), _left_pad(theirs.keys, width, 2)]
                )
                mine.values = torch.cat(
                    [_left_pad(mine.values, width, 2), _left_pad(theirs.values, width, 2)]
                )
            self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(mask, width, 1)])
            self.logits = torch.cat([self.logits, logits])
            self.positions = torch.cat([self.positions, following])
        self.rows += rows

    @torch.no_grad()
    def step(self) -> list[tuple[Row, Completion]]:
        """Sample one token for every row; return the rows that finished (now removed)."""
        log_probs = torch.log_softmax(self.logits, dim=-1)
        temperature = torch.tensor([r.sampling.temperature for r in self.rows]).unsqueeze(-1)
        top_p = torch.tensor([r.sampling.top_p for r in self.rows]).unsqueeze(-1)
        logits = self.logits
        if self.unsampled:
            logits = logits.clone()
            logits[:, self.unsampled] = float("-inf")
        chosen = sample(logits, temperature, top_p, [r.generator for r in self.rows])
        chosen_logprobs = log_probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).tolist()
        for i, r in enumerate(self.rows):
            token = int(chosen[i])
            r.tokens.append(token)
            r.logprobs.append(chosen_logprobs[i])
            if r.sampling.top_logprobs:
                values, ids = log_probs[i].topk(r.sampling.top_logprobs)
                r.tops.append(dict(zip(ids.tolist(), values.tolist(), strict=True)))
            r.finish = self._finished(r)
            if r.on_token is not None:
                r.on_token(token)
        done = [(r, self._completion(r)) for r in self.rows if r.finish is not None]
        for i, r in enumerate(self.rows):
            if r.finish is not None and r.keep_context:
                r.kept = self._context(i, r)
        keep = [i for i, r in enumerate(self.rows) if r.finish is None]
        self.retain(keep)
        if self.rows:
            step_ids = chosen[keep].unsqueeze(-1).to(self.device)
            ones = torch.ones((len(self.rows), 1), dtype=torch.long, device=self.device)
            self.mask = torch.cat([self.mask, ones], dim=-1)
            out = self.model(
                input_ids=step_ids,
                attention_mask=self.mask,
                position_ids=self.positions,
                use_cache=True,
                **{self.cache_keyword: self.cache},
            )
            self.cache, self.logits = returned_cache(out), out.logits[:, -1, :].float().cpu()
            self.positions = self.positions + 1
        return done

    def retain(self, keep: list[int]) -> None:
        """Keep only the rows at `keep` (finished ones, requests nobody waits for any more)."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        if not self.rows:
            self.cache = None
            return
        index = torch.tensor(keep)
        on_device = index.to(self.device)
        self.cache.batch_select_indices(on_device)
        self.mask, self.positions = self.mask[on_device], self.positions[on_device]
        self.logits = self.logits[index]
        lead = self.mask.shape[1] - int(self.mask.sum(-1).max())
        if lead > 0:  # columns no remaining row uses: decode attends over live tokens only
            self.mask = self.mask[:, lead:]
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, lead:], layer.values[:, :, lead:]

    def _context(self, i: int, r: Row) -> Context | None:
        """Row `i`'s cache (its prompt and all its tokens but the last, which was sampled and
        never fed), copied out of the batch; None where the cache is not one column per token
        (sliding-window layers) or the prompt had images (their positions are not text's)."""
        if r.images is not None or any(layer.is_sliding for layer in self.cache.layers):
            return None
        held = len(r.prompt) + len(r.tokens) - 1
        layers = [
            (layer.keys[i : i + 1, :, -held:].clone(), layer.values[i : i + 1, :, -held:].clone())
            for layer in self.cache.layers
        ]
        return Context(r.prompt + r.tokens[:-1], layers, r.stamp)

    def _finished(self, r: Row) -> str | None:
        if r.tokens[-1] in r.stop_ids:
            return "stop"
        if r.sampling.stop:
            text = self.tokenizer.decode(
                r.tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
            if any(s in text for s in r.sampling.stop):
                return "stop"
        return "length" if len(r.tokens) >= r.sampling.max_tokens else None

    def _completion(self, r: Row) -> Completion:
        text = self.tokenizer.decode(
            r.tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return Completion(
            r.tokens,
            r.logprobs,
            text,
            r.finish or "length",
            r.tops if r.sampling.top_logprobs else None,
            len(r.prompt),
        )


def prefill_chunks(rows: list[Row], waste: float = 0.5) -> list[list[Row]]:
    """`rows` in prefill chunks: rows with a context apart from fresh ones (images need a
    fresh prefill), each chunk of similar new lengths, so that padding (or re-fed cached
    tokens) stays under `waste` of the tokens a chunk computes."""
    chunks: list[list[Row]] = []
    for group in ([r for r in rows if r.context is None], [r for r in rows if r.context]):
        group = sorted(group, key=lambda r: len(r.prompt) - r.reused, reverse=True)
        chunk: list[Row] = []
        needed = widest = 0
        for r in group:
            new = len(r.prompt) - r.reused
            if chunk and needed + new < (1 - waste) * widest * (len(chunk) + 1):
                chunks.append(chunk)
                chunk, needed = [], 0
            if not chunk:
                widest = new
            chunk.append(r)
            needed += new
        if chunk:
            chunks.append(chunk)
    return chunks


def cache_keyword(model: Any) -> str:
    """The forward's name for the KV cache: `cache` in newer transformers (which take the old
    `past_key_values` only until 5.40), `past_key_values` in older ones. A LoRA-wrapped
    model is asked through the model its LoRA tuner wraps (only a process that imported peft
    has one; importing it here would cost every engine seconds). Not `get_base_model()`: that
    reads the active adapter's config, which a failing batch must not depend on."""
    peft = sys.modules.get("peft")
    base = model.base_model.model if peft and isinstance(model, peft.PeftModel) else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The KV cache a forward returned, under either name."""
    cache = out.get("cache")
    return cache if cache is not None else out.past_key_values


def _past_cache(rows: list[Row], past: list[int], width: int) -> DynamicCache:
    """The rows' contexts, the first `past[i]` tokens of each, left-padded to `width`."""
    template = next(r.context for r, p in zip(rows, past, strict=True) if p and r.context)
    layers = []
    for n, (k0, v0) in enumerate(template.layers):
        keys, values = [], []
        for r, p in zip(rows, past, strict=True):
            k, v = r.context.layers[n] if r.context is not None else (k0, v0)
            keys.append(_left_pad(k[:, :, :p], width, 2))
            values.append(_left_pad(v[:, :, :p], width, 2))
        layers.append((torch.cat(keys), torch.cat(values)))
    return DynamicCache(layers)


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    pad = [0, 0] * (t.dim() - dim - 1) + [missing, 0]
    return F.pad(t, pad)


def sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    generators: list[torch.Generator],
) -> torch.Tensor:
    """One token per row: greedy where temperature is 0, else sampling at temperature (with a
    top-p cut where top_p < 1). Each row draws its uniform number from its own generator and
    takes the same path whatever its batch mates do, so a seed gives the same tokens in any batch."""
    probs = torch.softmax(logits / temperature.clamp(min=1e-6), dim=-1)
    uniform = torch.stack([torch.rand((), generator=g) for g in generators])
    chosen = _inverse_cdf(probs, uniform)
    nucleus = (top_p.squeeze(-1) < 1).nonzero().squeeze(-1)
    if len(nucleus):  # sorting the vocabulary is only needed for a top-p cut
        sorted_probs, order = probs[nucleus].sort(-1, descending=True)
        keep = (sorted_probs.cumsum(-1) - sorted_probs) < top_p[nucleus]
        chosen[nucleus] = order.gather(
            -1, _inverse_cdf(sorted_probs * keep, uniform[nucleus]).unsqueeze(-1)
        ).squeeze(-1)
    return torch.where(temperature.squeeze(-1) == 0, logits.argmax(-1), chosen)


def _inverse_cdf(weights: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    cdf = weights.cumsum(-1)
    index = torch.searchsorted(cdf, uniform.unsqueeze(-1) * cdf[:, -1:])
    return index.squeeze(-1).clamp(max=weights.shape[-1] - 1)
