"""The `hf` engine: a transformers model in-process, the embedded default on CPU and in tests.

Concurrent `generate` calls are batched dynamically: requests that arrive while a batch runs
(or within `batch_window_s` of the first) form the next batch. A batch runs in a worker
thread, so the event loop keeps driving environments meanwhile. Prompts are left-padded and
decoded with a KV cache; each request samples with its own seeded generator, so a seed gives
the same completion whatever else shares the batch.

Returned log-probabilities are log-softmax of the raw logits (temperature 1, no top-p) at
float32, the quantity the trainer recomputes for its importance ratio.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from toolgym.agents.engines.base import Completion, EngineError, SamplingParams
from toolgym.errors import ToolgymError


class BadRequestError(ToolgymError, ValueError):
    """The request itself is invalid (empty prompt, too long, unknown adapter, ...)."""


@dataclass
class _Request:
    prompt: list[int]
    sampling: SamplingParams
    adapter: str | None
    generator: torch.Generator
    future: asyncio.Future[Completion]
    stop_ids: set[int] = field(default_factory=set)


class HFEngine:
    """Generate with a transformers causal LM. `model` is a directory or a loaded model."""

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        max_batch_size: int = 64,
        batch_window_s: float = 0.002,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, (str, Path)):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        if tokenizer is None:
            raise ValueError("pass the tokenizer along with a loaded model")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.max_batch_size, self.batch_window_s = max_batch_size, batch_window_s
        self.max_length = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        eos = model.generation_config.eos_token_id
        self.end_ids = {
            *(eos if isinstance(eos, list) else [eos] if eos is not None else []),
            tokenizer.eos_token_id,
        } - {None}
        self.pad_id = (
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else next(iter(self.end_ids))
        )
        self.policy_version = 0
        self.adapters: dict[str, str] = {}
        self._seeds = torch.Generator().manual_seed(seed)
        self._model_lock = threading.Lock()
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task[None] | None = None

    # ----- public API -----------------------------------------------------------------------
    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        self._validate(prompt_ids, sampling, adapter)
        seed = (
            sampling.seed
            if sampling.seed is not None
            else int(torch.randint(2**62, (), generator=self._seeds))
        )
        loop = asyncio.get_running_loop()
        request = _Request(
            list(prompt_ids),
            sampling,
            adapter,
            torch.Generator().manual_seed(seed),
            loop.create_future(),
        )
        request.stop_ids = self.end_ids | set(sampling.stop_token_ids)
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._serve_batches(self._queue))
        self._queue.put_nowait(request)
        return await request.future

    async def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load new weights (after a training step) and bump `policy_version`."""
        await asyncio.to_thread(self._load_state, state_dict)

    async def load_adapter(self, name: str, path: str) -> None:
        """Load a LoRA adapter (peft) that requests can name with `adapter=`."""
        await asyncio.to_thread(self._load_adapter, name, path)

    async def unload_adapter(self, name: str) -> None:
        if name not in self.adapters:
            raise BadRequestError(f"no LoRA adapter named '{name}' is loaded")
        with self._model_lock:
            self.model.delete_adapter(name)
            del self.adapters[name]

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    # ----- batching ---------------------------------------------------------------------------
    async def _serve_batches(self, queue: asyncio.Queue[_Request]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            deadline = loop.time() + self.batch_window_s
            while len(batch) < self.max_batch_size:
                if not queue.empty():
                    batch.append(queue.get_nowait())
                    continue
                if loop.time() >= deadline:
                    break
                await asyncio.sleep(min(0.0005, deadline - loop.time()))
            batch = [r for r in batch if not r.future.cancelled()]
            for adapter, group in itertools.groupby(
                sorted(batch, key=lambda r: r.adapter or ""), key=lambda r: r.adapter
            ):
                requests = list(group)
                try:
                    results = await asyncio.to_thread(self._generate_batch, requests, adapter)
                except Exception as exc:
                    for r in requests:
                        if not r.future.done():
                            r.future.set_exception(
                                EngineError(f"generation failed: {type(exc).__name__}: {exc}")
                            )
                    continue
                for r, completion in zip(requests, results, strict=True):
                    if not r.future.done():
                        r.future.set_result(completion)

    # ----- the model (worker thread) ------------------------------------------------------
    @torch.no_grad()
    def _generate_batch(self, requests: list[_Request], adapter: str | None) -> list[Completion]:
        with self._model_lock, self._adapter(adapter):
            return self._decode(requests)

    def _decode(self, requests: list[_Request]) -> list[Completion]:
        size, longest = len(requests), max(len(r.prompt) for r in requests)
        input_ids = torch.full((size, longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((size, longest), dtype=torch.long)
        for i, r in enumerate(requests):
            input_ids[i, longest - len(r.prompt) :] = torch.tensor(r.prompt)
            mask[i, longest - len(r.prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True
        )
        cache, logits = out.past_key_values, out.logits[:, -1, :].float()
        next_position = positions[:, -1:] + 1
        temperature = torch.tensor([r.sampling.temperature for r in requests]).unsqueeze(-1)
        top_p = torch.tensor([r.sampling.top_p for r in requests]).unsqueeze(-1)
        tokens: list[list[int]] = [[] for _ in requests]
        logprobs: list[list[float]] = [[] for _ in requests]
        tops: list[list[dict[int, float]]] = [[] for _ in requests]
        finish: list[str | None] = [None] * size
        for _ in range(max(r.sampling.max_tokens for r in requests)):
            log_probs = torch.log_softmax(logits, dim=-1)
            chosen = _sample(logits, temperature, top_p, [r.generator for r in requests])
            chosen_logprobs = log_probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).tolist()
            for i, r in enumerate(requests):
                if finish[i] is not None:
                    continue
                token = int(chosen[i])
                tokens[i].append(token)
                logprobs[i].append(chosen_logprobs[i])
                if r.sampling.top_logprobs:
                    values, ids = log_probs[i].topk(r.sampling.top_logprobs)
                    tops[i].append(dict(zip(ids.tolist(), values.tolist(), strict=True)))
                finish[i] = self._finished(r, tokens[i])
            if all(f is not None for f in finish):
                break
            step_ids = torch.tensor([t[-1] for t in tokens]).unsqueeze(-1)
            mask = torch.cat([mask, torch.ones((size, 1), dtype=torch.long)], dim=-1)
            out = self.model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=next_position,
                past_key_values=cache,
                use_cache=True,
            )
            cache, logits = out.past_key_values, out.logits[:, -1, :].float()
            next_position = next_position + 1
        return [
            Completion(
                token_ids=tokens[i],
                logprobs=logprobs[i],
                text=self.tokenizer.decode(
                    tokens[i], skip_special_tokens=True, clean_up_tokenization_spaces=False
                ),
                finish_reason=finish[i] or "length",
                top_logprobs=tops[i] if r.sampling.top_logprobs else None,
                prompt_tokens=len(r.prompt),
            )
            for i, r in enumerate(requests)
        ]

    def _finished(self, request: _Request, tokens: list[int]) -> str | None:
        if tokens[-1] in request.stop_ids:
            return "stop"
        if request.sampling.stop:
            text = self.tokenizer.decode(
                tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
            if any(s in text for s in request.sampling.stop):
                return "stop"
        return "length" if len(tokens) >= request.sampling.max_tokens else None

    def _validate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None
    ) -> None:
        if not prompt_ids:
            raise BadRequestError("the prompt is empty")
        vocab = self.model.config.vocab_size
        if any(not isinstance(t, int) or not 0 <= t < vocab for t in prompt_ids):
            raise BadRequestError(f"prompt token ids must be integers in [0, {vocab})")
        if sampling.max_tokens < 1:
            raise BadRequestError(f"max_tokens must be at least 1, got {sampling.max_tokens}")
        if len(prompt_ids) + sampling.max_tokens > self.max_length:
            raise BadRequestError(
                f"prompt ({len(prompt_ids)} tokens) + max_tokens ({sampling.max_tokens}) exceeds the model's "
                f"context of {self.max_length} tokens"
            )
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise BadRequestError("temperature must be >= 0 and top_p in (0, 1]")
        if adapter is not None and adapter not in self.adapters:
            raise BadRequestError(f"no LoRA adapter named '{adapter}' is loaded")

    @contextlib.contextmanager
    def _adapter(self, adapter: str | None) -> Iterator[None]:
        if not self.adapters:
            yield
        elif adapter is None:
            with self.model.disable_adapter():
                yield
        else:
            self.model.set_adapter(adapter)
            yield

    def _load_state(self, state_dict: dict[str, torch.Tensor]) -> None:
        with self._model_lock:
            self.model.load_state_dict(state_dict, strict=False)
            self.policy_version += 1

    def _load_adapter(self, name: str, path: str) -> None:
        from peft import PeftModel

        if name in self.adapters:
            raise BadRequestError(f"a LoRA adapter named '{name}' is already loaded")
        if not (Path(path) / "adapter_config.json").is_file():
            raise BadRequestError(f"no LoRA adapter at {path} (adapter_config.json is missing)")
        with self._model_lock:
            if isinstance(self.model, PeftModel):
                self.model.load_adapter(path, adapter_name=name)
            else:
                self.model = PeftModel.from_pretrained(self.model, path, adapter_name=name).eval()
            self.adapters[name] = path


def _sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    generators: list[torch.Generator],
) -> torch.Tensor:
    """One token per row: greedy where temperature is 0, else top-p sampling at temperature,
    drawing each row's uniform number from its own generator (batch-independent seeds)."""
    greedy = logits.argmax(-1)
    probs = torch.softmax(logits / temperature.clamp(min=1e-6), dim=-1)
    sorted_probs, order = probs.sort(-1, descending=True)
    keep = (sorted_probs.cumsum(-1) - sorted_probs) < top_p
    sorted_probs = sorted_probs * keep
    cdf = sorted_probs.cumsum(-1)
    uniform = (
        torch.stack([torch.rand((), generator=g) for g in generators]).unsqueeze(-1) * cdf[:, -1:]
    )
    index = torch.searchsorted(cdf, uniform).clamp(max=logits.shape[-1] - 1)
    sampled = order.gather(-1, index).squeeze(-1)
    return torch.where(temperature.squeeze(-1) == 0, greedy, sampled)
