"""Episode contexts of the hf engine: the KV cache an episode's last turn left behind, kept
so that its next turn prefills only the tokens it adds (the env's answer, after the
model's own) instead of the whole conversation again.

A context is reused only when it is certainly right: under the weights that computed it
(its stamp: the policy version, the adapter and the parameters' in-place update counters,
so a weight sync or an optimizer step on a shared model both drop it) and for the tokens it
holds (a prompt that left the cached path reuses only their common prefix). Contexts live
under a memory budget, least recently used first out; an evicted one is simply prefilled
again, with the same result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Context:
    """The keys and values of `tokens`, one (keys, values) pair per layer, batch of one."""

    tokens: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    stamp: Hashable

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)

    def cropped(self, length: int) -> Context:
        """The context of the first `length` tokens (views, no copy)."""
        if length == len(self.tokens):
            return self
        layers = [(k[:, :, :length], v[:, :, :length]) for k, v in self.layers]
        return Context(self.tokens[:length], layers, self.stamp)


def weights_stamp(model: Any, adapter: str | None) -> Hashable:
    """What a context was computed under. Every in-place change of a parameter (an optimizer
    step, `load_state_dict`) bumps that tensor's version counter, so their sum moves with any
    update of the weights, whoever made it."""
    return adapter, sum(p._version for p in model.parameters())


class ContextStore:
    """Contexts by episode, within `budget_bytes` (0 keeps none). Thread-safe: the engine's
    worker takes and puts, the caller's loop ends episodes."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.nbytes = 0
        self.reused_tokens = 0
        """Prompt tokens that were not prefilled again, because a context held them."""
        self.evictions = 0
        self._contexts: OrderedDict[Hashable, Context] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._contexts)

    def take(self, episode: Hashable, prompt: list[int], stamp: Hashable) -> Context | None:
        """The episode's context cropped to what `prompt` shares with it (at least the last
        prompt token is left to prefill, for its logits); None when nothing is reusable."""
        with self._lock:
            context = self._contexts.pop(episode, None)
            if context is not None:
                self.nbytes -= context.nbytes
        if context is None or context.stamp != stamp:
            return None
        shared = _common_prefix(context.tokens, prompt, len(prompt) - 1)
        if shared == 0:
            return None
        self.reused_tokens += shared
        return context.cropped(shared)

    def put(self, episode: Hashable, context: Context) -> None:
        size = context.nbytes
        if size > self.budget_bytes:
            return
        with self._lock:
            old = self._contexts.pop(episode, None)
            if old is not None:
                self.nbytes -= old.nbytes
            while self._contexts and self.nbytes + size > self.budget_bytes:
                _, evicted = self._contexts.popitem(last=False)
                self.nbytes -= evicted.nbytes
                self.evictions += 1
            self._contexts[episode] = context
            self.nbytes += size

    def drop(self, episode: Hashable) -> None:
        with self._lock:
            context = self._contexts.pop(episode, None)
            if context is not None:
                self.nbytes -= context.nbytes

    def clear(self) -> None:
        with self._lock:
            self._contexts.clear()
            self.nbytes = 0


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:  # the usual case: the prompt extends the context
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low
