"""The `hf` engine: a transformers model in-process, the embedded default on CPU and in tests.

A worker thread runs continuous batching (hf_batch.py): requests join the running batch
between decode steps and each returns the moment its own row finishes, so the event loop
keeps stepping environments while the model decodes, and an episode's tool call starts as
soon as its own turn ends. Each request samples with its own seeded generator, so a seed
gives the same completion whatever else shares the batch.

Returned log-probabilities are log-softmax of the raw logits (temperature 1, no top-p) at
float32, the quantity the trainer recomputes for its importance ratio. Weight updates and
adapter loads take the model lock between decode steps; trainers update between collections.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from toolgym.agents.engines.base import (
    Capabilities,
    Completion,
    EngineError,
    PolicyContext,
    SamplingParams,
    request_problem,
)
from toolgym.agents.engines.hf_batch import Row, RunningBatch
from toolgym.agents.engines.hf_contexts import ContextStore, weights_stamp
from toolgym.agents.models.device import Precision, resolve_precision
from toolgym.agents.models.loading import check_model_dir, load_model, load_tokenizer
from toolgym.agents.vision import ImageEncoder, ImageError, ImageInputs
from toolgym.errors import ToolgymError
from toolgym.log import get_logger

log = get_logger(__name__)


FAST_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
"""Attention kernels the engine uses on a GPU (see HFEngine._compute)."""
QUIET_S = 0.002
"""An idle engine's wait for the next request of a burst (see HFEngine._collect)."""
BURST_S = 0.05
"""The longest it waits for a burst to end before it starts generating."""


class BadRequestError(ToolgymError, ValueError):
    """The request itself is invalid (empty prompt, too long, unknown adapter, ...)."""


def _call_soon(
    loop: asyncio.AbstractEventLoop, callback: Callable[[int], None], token: int
) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop has closed
        loop.call_soon_threadsafe(callback, token)


@dataclass
class _Request:
    row: Row
    adapter: str | None
    future: asyncio.Future[Completion]
    loop: asyncio.AbstractEventLoop
    episode: Hashable | None = None

    def resolve(self, result: Completion | None = None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if not self.future.done():
                self.future.set_exception(error) if error else self.future.set_result(result)  # type: ignore[arg-type]

        with contextlib.suppress(RuntimeError):  # the caller's loop has closed: nobody waits
            self.loop.call_soon_threadsafe(settle)


class HFEngine:
    """Generate with a transformers causal LM. `model` is a directory or a loaded model."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        "shared", full_weights=True, adapters=True, images=True, tokenizer=True,
        episode_context=True,
    )  # fmt: skip
    """A trainer's engine holds the trained model itself: its updates are the engine's. It
    also serves adapters and takes full weights (as a server), reads images, renders with
    the tokenizer it loaded and keeps each episode's KV cache between its turns."""

    @classmethod
    def for_policy(cls, context: PolicyContext) -> HFEngine:
        """The engine a trainer generates with: the same model object, so no copy, no sync
        (and the trainer's image encoder, so a screenshot is prepared once). With
        `own_weights` (asynchronous training: it generates while the trainer updates), a
        frozen copy of the model, which takes the trainer's weights at each sync."""
        model = context.model
        if context.own_weights:
            model = copy.deepcopy(model).eval().requires_grad_(False)
        return cls(
            model, context.tokenizer, seed=context.seed, precision=context.precision,
            images=context.images,
        )  # fmt: skip

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        max_batch_size: int = 64,
        seed: int = 0,
        precision: Precision | None = None,
        images: ImageEncoder | None = None,
        context_budget_mb: int = 1024,
    ) -> None:
        """`images`: the image encoder of a vision-language model passed as a loaded model
        (found in the directory when `model` is one). `context_budget_mb`: memory for the
        KV caches kept between an episode's turns (least recently used evicted first)."""
        if isinstance(model, (str, Path)):
            check_model_dir(model)
            precision = precision or resolve_precision()
            tokenizer = tokenizer or load_tokenizer(model)
            loaded: Any = load_model(model)
            images = images or ImageEncoder.for_model(model, loaded.config)
            model = loaded.to(precision.device)
        self.precision = precision or Precision(next(model.parameters()).device, torch.float32)
        """Compute precision: autocast around every forward pass (the trainer's own, when
        the engine shares the trained model)."""
        if tokenizer is None:
            raise ValueError("pass the tokenizer along with a loaded model")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.images = images
        self.max_batch_size = max_batch_size
        text_config = model.config.get_text_config()
        self.vocab_size = int(text_config.vocab_size)
        self.max_length = int(getattr(text_config, "max_position_embeddings", None) or 1 << 30)
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
        self.peak_batch_size = 0
        self.decode_steps = 0
        """Forward passes that produced a token for every running row (a throughput gauge)."""
        self.adapters: dict[str, str] = {}
        self.contexts = ContextStore(context_budget_mb << 20)
        """Each running episode's KV cache, kept between its turns (hf_contexts.py)."""
        self._seeds = random.Random(seed)
        """Draws the seeds of requests that bring none (in Python: a torch op on the caller's
        thread waits on the worker's forward passes)."""
        self._model_lock = threading.Lock()
        self._inbox: queue.Queue[_Request | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    # ----- public API -----------------------------------------------------------------------
    async def generate(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        adapter: str | None = None,
        on_token: Callable[[int], None] | None = None,
        images: list[str] | None = None,
        episode: Hashable | None = None,
    ) -> Completion:
        """`on_token` (optional) is called on the caller's event loop with each token as it
        is sampled, before the completion is returned (for streaming). `images`: the data
        URLs of the images whose placeholders are in `prompt_ids` (vision-language models).
        `episode`: a key unique to the episode this turn belongs to; its cache is kept for
        its next turn until `end_episode` (turns with images are prefilled whole)."""
        self.check_request(prompt_ids, sampling, adapter)
        if episode is not None and not isinstance(episode, Hashable):
            raise BadRequestError(f"an episode key must be hashable, got {type(episode).__name__}")
        pixels = await asyncio.to_thread(self.pixels, prompt_ids, images) if images else None
        seed = sampling.seed if sampling.seed is not None else self._seeds.getrandbits(62)
        row = Row(
            list(prompt_ids),
            sampling,
            torch.Generator().manual_seed(seed),
            self.end_ids | set(sampling.stop_token_ids),
            images=pixels,
            keep_context=episode is not None and pixels is None,
        )
        loop = asyncio.get_running_loop()
        request = _Request(row, adapter, loop.create_future(), loop, episode)
        row.owner = request
        if on_token is not None:
            row.on_token = functools.partial(_call_soon, loop, on_token)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._serve, name="toolgym-hf-engine", daemon=True
            )
            self._thread.start()
        self._inbox.put(request)
        return await request.future

    def end_episode(self, episode: Hashable) -> None:
        """The episode is over: free the cache kept for its next turn."""
        self.contexts.drop(episode)

    async def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load new weights (after a training step)."""
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
            self._settle_active_adapter()

    async def aclose(self) -> None:
        """Stop the worker thread; requests still waiting fail with EngineError."""
        if self._thread is not None and self._thread.is_alive():
            self._inbox.put(None)
            await asyncio.to_thread(self._thread.join, 30)
        self._thread = None

    # ----- the worker thread ------------------------------------------------------------------
    def _serve(self) -> None:
        batch = RunningBatch(self.model, self.tokenizer, self.pad_id)
        waiting: deque[_Request] = deque()
        adapter: str | None = None
        self._warm_up()
        while True:
            joining: list[_Request] = []
            try:
                if not self._collect(waiting, block=not batch and not waiting):
                    self._fail(
                        [r.owner for r in batch.rows] + list(waiting),
                        EngineError("the engine was closed"),
                    )
                    return
                if not batch:
                    adapter = waiting[0].adapter if waiting else None
                batch.retain([i for i, r in enumerate(batch.rows) if not r.owner.future.done()])
                joining = self._take(waiting, adapter, self.max_batch_size - len(batch))
                with self._model_lock, self._adapter(adapter), self._compute():
                    if joining:
                        self._resume(joining, adapter)
                        batch.admit([r.row for r in joining])
                        for r in joining:
                            r.row.context = None  # the batch holds it now
                    self.peak_batch_size = max(self.peak_batch_size, len(batch))
                    finished = []
                    if batch:
                        finished = batch.step()
                        self.decode_steps += 1
                    self._keep([row for row, _ in finished], adapter)
                for row, completion in finished:
                    row.owner.resolve(completion)
            except Exception as exc:  # a broken batch fails its requests, never the thread
                log.exception("generation failed")
                admitted = {id(r.owner) for r in batch.rows}
                self._fail(
                    [r.owner for r in batch.rows]
                    + [r for r in joining if id(r) not in admitted],  # taken, not yet admitted
                    EngineError(f"generation failed: {type(exc).__name__}: {exc}"),
                )
                batch = RunningBatch(self.model, self.tokenizer, self.pad_id)

    def _resume(self, joining: list[_Request], adapter: str | None) -> None:
        """Give each joining turn its episode's context, where one holds under these weights."""
        stamp = weights_stamp(self.model, adapter)
        for r in joining:
            r.row.stamp = stamp
            if r.row.keep_context:
                r.row.context = self.contexts.take(r.episode, r.row.prompt, stamp)

    def _keep(self, finished: list[Row], adapter: str | None) -> None:
        """Keep finished turns' caches for their episodes' next turns, before they return
        (the next turn may be asked for at once), unless the weights moved meanwhile."""
        kept = [(r, r.kept) for r in finished if r.kept is not None and not r.owner.future.done()]
        if not kept:
            return
        stamp = weights_stamp(self.model, adapter)
        for r, context in kept:
            if context.stamp == stamp:
                self.contexts.put(r.owner.episode, context)
            r.kept = None

    @contextlib.contextmanager
    def _compute(self) -> Iterator[None]:
        """The precision's autocast, and on a GPU no cuDNN attention: it builds a plan per
        new shape, and a running batch's shapes change every step (a plan per step, slower
        than the other kernels by far until every shape has been seen once)."""
        with self.precision.autocast(), contextlib.ExitStack() as stack:
            if self.precision.device.type == "cuda":
                stack.enter_context(sdpa_kernel(FAST_ATTENTION))
            yield

    def _warm_up(self) -> None:
        """One small padded prefill and a decode step when the worker starts, so that what a
        process pays once (kernel set-up, allocator pools) is paid here, not by the first
        requests."""
        batch = RunningBatch(self.model, self.tokenizer, self.pad_id)
        rows = [
            Row(
                [self.pad_id] * n,
                SamplingParams(max_tokens=2, temperature=0),
                torch.Generator(),
                set(),
            )
            for n in (3, 5)
        ]
        try:
            with self._model_lock, self._compute():
                batch.admit(rows)
                batch.step()
        except Exception:  # a model that fails here fails its requests with the reason
            log.debug("warm-up failed", exc_info=True)

    def _collect(self, waiting: deque[_Request], block: bool) -> bool:
        """Move new requests into `waiting`; False once the engine is closing. An idle
        engine woken by a request waits for the rest of its burst (until the inbox is quiet
        for `QUIET_S`, at most `BURST_S`), so episodes that start together prefill and decode
        together instead of in a staggered line of their own."""
        deadline = time.monotonic() + BURST_S
        try:
            item = self._inbox.get(block=block)
            while True:
                if item is None:
                    return False
                waiting.append(item)
                if not block or len(waiting) >= self.max_batch_size:
                    item = self._inbox.get_nowait()
                else:
                    item = self._inbox.get(
                        timeout=min(QUIET_S, max(deadline - time.monotonic(), 0))
                    )
        except queue.Empty:
            return True

    @staticmethod
    def _take(waiting: deque[_Request], adapter: str | None, room: int) -> list[_Request]:
        taken = [r for r in waiting if r.adapter == adapter and not r.future.done()][: max(room, 0)]
        for r in list(waiting):
            if r in taken or r.future.done():
                waiting.remove(r)
        return taken

    @staticmethod
    def _fail(requests: list[_Request], error: BaseException) -> None:
        for r in requests:
            r.resolve(error=error)

    def check_request(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None
    ) -> None:
        """Raise BadRequestError when this engine cannot serve the request (generate does
        the same check; a server streaming its answer checks first, to answer a clean 400)."""
        if problem := request_problem(prompt_ids, sampling, self.vocab_size, self.max_length):
            raise BadRequestError(problem)
        if adapter is not None and adapter not in self.adapters:
            raise BadRequestError(f"no LoRA adapter named '{adapter}' is loaded")

    def pixels(self, prompt_ids: list[int], images: list[str]) -> ImageInputs | None:
        """The model inputs of a prompt's images, checked against its placeholder tokens
        (BadRequestError when they do not fit; a server checks before it streams)."""
        if self.images is None:
            raise BadRequestError("this model reads text only: the prompt cannot have images")
        try:
            pixels = self.images.encode(images)
            want = sum(self.images.tokens(url) for url in images)
        except ImageError as exc:
            raise BadRequestError(str(exc)) from None
        have = prompt_ids.count(self.images.image_token_id)
        if have != want:
            raise BadRequestError(
                f"the prompt has {have} image placeholder tokens; its {len(images)} images take {want}"
            )
        return pixels

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
            self.contexts.clear()

    def _load_adapter(self, name: str, path: str) -> None:
        from peft import PeftModel

        if name in self.adapters:
            raise BadRequestError(f"a LoRA adapter named '{name}' is already loaded")
        if not (Path(path) / "adapter_config.json").is_file():
            raise BadRequestError(f"no LoRA adapter at {path} (adapter_config.json is missing)")
        with self._model_lock:
            try:
                if isinstance(self.model, PeftModel):
                    self.model.load_adapter(path, adapter_name=name)
                else:
                    loaded = PeftModel.from_pretrained(self.model, path, adapter_name=name)
                    self.model = loaded.eval()
            except Exception as exc:  # a bad adapter is the request's fault, not the server's
                if isinstance(self.model, PeftModel) and name in self.model.peft_config:
                    with contextlib.suppress(Exception):
                        self.model.delete_adapter(name)
                raise BadRequestError(
                    f"could not load the LoRA adapter at {path}: {type(exc).__name__}: {exc}"
                ) from None
            self.adapters[name] = path
            self._settle_active_adapter()

    def _settle_active_adapter(self) -> None:
        """Keep a loaded adapter active. peft leaves a deleted adapter active, and a new one
        loaded next to it inactive; its `disable_adapter` (the base model's turns) then
        fails on the name it no longer has."""
        if self.adapters and self.model.active_adapter not in self.adapters:
            self.model.set_adapter(next(iter(self.adapters)))
