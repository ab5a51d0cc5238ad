"""The `vllm` engine: vLLM's asynchronous engine, driven from this process.

Runs on a GPU (`pip install 'toolgym[vllm]'`) and on the CPU with vLLM's CPU build
(`make vllm`, see docs/distributed.md). vLLM runs its engine core in a child process; this
class is its client. Prompts go in as token ids and the completion's ids and sampled-token
log-probabilities come back as vLLM produced them: raw log-probabilities, before
temperature and top-p (vLLM's default), which is what PPO's importance ratio needs.

Weight sync is full weights (`Capabilities("full")`): `update_weights(state_dict)` writes
the trained tensors to a safetensors file in shared memory and every worker loads it with
vLLM's in-place reload (vllm_worker.py); the prefix cache is reset after. `aclose` stops
vLLM's processes; a later request starts them again with the last synced weights. LoRA
adapters work too: `load_adapter(name, path)` registers a trained adapter and requests
naming it use it; `unload_adapter(name)` removes it. An engine core that dies fails every
request in flight with an EngineError (rollouts mask those episodes) instead of hanging.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path
from typing import Any, ClassVar

from toolgym.agents.engines.base import (
    Capabilities,
    Completion,
    EngineError,
    PolicyContext,
    SamplingParams,
    request_problem,
)

WORKER_EXTENSION = "toolgym.agents.engines.vllm_worker.WeightLoader"
"""vLLM imports worker extensions by dotted path (module.Class)."""
CPU_KV_CACHE_GIB = 1.0
"""The KV cache a CPU engine reserves unless VLLM_CPU_KVCACHE_SPACE says otherwise: vLLM
would otherwise take most of the machine's memory (and a minute to fill it), beside the
trainer. 1 GiB holds half a million tokens of the `mini` model."""
CPU_BLOCK_SIZE = 32
"""Tokens per KV cache block on the CPU (vLLM's CPU default is 128). The prefix cache hits
whole blocks only, and an episode's next turn adds tens of tokens to the last one: with
128-token blocks up to 127 tokens of each turn's prompt were computed again."""


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(
            "the vllm engine needs vLLM: pip install 'toolgym[vllm]' on a GPU machine, "
            "`make vllm` (vLLM's CPU build) on a CPU one"
        ) from exc
    return vllm


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def cpu_text_config(model: str) -> Any:
    """The model's text config, checked for what vLLM's CPU build runs: a head size its CPU
    attention rejects is refused here, before vLLM starts (its own error comes from the
    engine's child process, after a long start)."""
    from transformers import AutoConfig
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    supported = CPUAttentionBackend.get_supported_head_sizes()
    config = AutoConfig.from_pretrained(model).get_text_config()
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head_dim not in supported:
        raise EngineError(
            f"{model} has attention heads of size {head_dim}, which vLLM's CPU attention does "
            f"not run ({', '.join(map(str, supported))} it does): build the model "
            "with `toolgym model init --size mini` (or small), or use engine.kind=hf"
        )
    return config


def write_weights(state_dict: dict[str, Any], dtype: Any, folder: Path) -> Path:
    """`state_dict` as a safetensors file in `folder`, in the engine's dtype. Tensors that
    share storage (tied embeddings) are written once, under their first name: the model's
    `load_weights` ties them again."""
    from safetensors.torch import save_file

    seen: set[int] = set()
    tensors = {}
    for name, tensor in state_dict.items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        tensors[name] = tensor.detach().to("cpu", dtype).contiguous()
    path = folder / f"weights-{uuid.uuid4().hex}.safetensors"
    save_file(tensors, str(path))
    return path


class VLLMEngine:
    capabilities: ClassVar[Capabilities] = Capabilities(
        "full", full_weights=True, adapters=True, needs=("vllm",)
    )

    @classmethod
    def for_policy(cls, context: PolicyContext) -> VLLMEngine:
        """The engine a trainer generates with: the policy's weights at the trainer's
        compute dtype (so its log-probabilities are the learner's), updated by each sync."""
        dtype = str(context.precision.dtype).removeprefix("torch.") if context.precision else "auto"
        return cls(context.model_path, dtype=dtype, seed=context.seed)

    def __init__(
        self,
        model: str,
        *,
        enable_lora: bool = True,
        max_lora_rank: int = 64,
        dtype: str = "auto",
        seed: int = 0,
        **engine_args: Any,
    ) -> None:
        """`engine_args`: any of vLLM's AsyncEngineArgs. On the CPU the defaults are eager
        mode (no compile at start), a KV cache of CPU_KV_CACHE_GIB, blocks of CPU_BLOCK_SIZE
        tokens and whole-prompt prefills."""
        vllm = _import_vllm()
        model = str(model)
        engine_args.setdefault("worker_extension_cls", WORKER_EXTENSION)
        engine_args.setdefault("enable_prefix_caching", True)
        if on_cpu():
            config = cpu_text_config(model)
            engine_args.setdefault("enforce_eager", True)
            engine_args.setdefault("block_size", CPU_BLOCK_SIZE)
            # vLLM's CPU build kills its engine when a seeded request's prompt is prefilled
            # in chunks ("CPU Generator does not use offset"), and rollouts seed every turn:
            # prompts are prefilled whole
            engine_args.setdefault("enable_chunked_prefill", False)
            engine_args.setdefault(
                "max_num_batched_tokens",
                engine_args.get("max_model_len") or config.max_position_embeddings,
            )
            if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
                engine_args.setdefault("kv_cache_memory_bytes", int(CPU_KV_CACHE_GIB * 2**30))
        self.args = vllm.AsyncEngineArgs(
            model=model, enable_lora=enable_lora, max_lora_rank=max_lora_rank, dtype=dtype,
            seed=seed, **engine_args,
        )  # fmt: skip
        self.engine: Any = vllm.AsyncLLMEngine.from_engine_args(self.args)
        self.closed = False
        self._restarting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        """A lock per event loop (a lock binds to the loop it first waits on)."""
        shared = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self._folder = Path(tempfile.mkdtemp(prefix="toolgym-vllm-weights-", dir=shared))
        weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._weights: Path | None = None
        """The last synced weights, kept to start vLLM again with them after `aclose`."""
        self.dtype = self.engine.model_config.dtype
        """The dtype vLLM computes in (weights are sent in it)."""
        self.vocab_size = int(self.engine.model_config.get_vocab_size())
        self.max_length = int(self.engine.model_config.max_model_len)
        self._adapters: dict[str, Any] = {}
        self._adapter_ids = itertools.count(1)

    def _params(self, sampling: SamplingParams) -> Any:
        import vllm

        return vllm.SamplingParams(
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop=sampling.stop or None,
            stop_token_ids=sampling.stop_token_ids or None,
            # the text keeps the stop string, as its tokens are kept (SamplingParams.stop)
            include_stop_str_in_output=True,
            seed=sampling.seed,
            logprobs=max(sampling.top_logprobs, 1),
        )

    async def generate(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        adapter: str | None = None,
        images: list[str] | None = None,
    ) -> Completion:
        if images:
            raise EngineError(
                "images in the prompt: this engine passes no multi-modal data to vLLM yet; "
                "generate with the hf engine for a vision-language model"
            )
        if problem := request_problem(prompt_ids, sampling, self.vocab_size, self.max_length):
            raise EngineError(problem)
        from vllm.inputs import TokensPrompt

        lora = self._adapters.get(adapter) if adapter else None
        if adapter and lora is None:
            raise EngineError(f"no LoRA adapter named '{adapter}' is loaded")
        await self._running()
        final = None
        try:
            async for output in self.engine.generate(
                TokensPrompt(prompt_token_ids=list(prompt_ids)),
                self._params(sampling),
                uuid.uuid4().hex,
                lora_request=lora,
            ):
                final = output
        except EngineError:
            raise
        except Exception as exc:  # vLLM's EngineDeadError and the like, with their cause
            raise EngineError(f"vLLM failed the request: {type(exc).__name__}: {exc}") from exc
        if final is None or not final.outputs:
            raise EngineError("vLLM returned no output")
        return self._completion(final, sampling, len(prompt_ids))

    @staticmethod
    def _completion(final: Any, sampling: SamplingParams, prompt_tokens: int) -> Completion:
        out = final.outputs[0]
        ids = list(out.token_ids)
        steps = out.logprobs or []
        logprobs = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
        tops = None
        if sampling.top_logprobs:
            tops = [
                {t: float(lp.logprob) for t, lp in step.items() if lp.rank <= sampling.top_logprobs}
                for step in steps
            ]
        return Completion(
            ids,
            logprobs,
            out.text,
            "length" if out.finish_reason == "length" else "stop",
            top_logprobs=tops,
            prompt_tokens=prompt_tokens,
            cached_tokens=int(final.num_cached_tokens or 0),
        )

    async def update_weights(self, state_dict: dict[str, Any]) -> None:
        """Load the trained weights into every worker (through a safetensors file in shared
        memory, see vllm_worker.py), then drop the prefix cache, which holds the old
        weights' keys and values. The file is kept until the next sync: a restart after
        `aclose` loads it."""
        await self._running()
        path = await asyncio.to_thread(write_weights, state_dict, self.dtype, self._folder)
        try:
            await self._load(path)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if self._weights is not None:
            self._weights.unlink(missing_ok=True)
        self._weights = path

    async def _load(self, path: Path) -> None:
        loaded = await self.engine.collective_rpc("load_weights_file", args=(str(path),))
        if not loaded or min(loaded) == 0:
            raise EngineError("vLLM's workers loaded no weights from the sync")
        await self.engine.reset_prefix_cache()

    async def load_adapter(self, name: str, path: str) -> None:
        from vllm.lora.request import LoRARequest

        await self._running()
        request = LoRARequest(name, next(self._adapter_ids), path)
        if not await self.engine.add_lora(request):
            raise EngineError(f"vLLM did not load the LoRA adapter at {path}")
        self._adapters[name] = request

    async def unload_adapter(self, name: str) -> None:
        request = self._adapters.pop(name, None)
        if request is None:
            raise EngineError(f"no LoRA adapter named '{name}' is loaded")
        if not self.closed:
            await self.engine.remove_lora(request.lora_int_id)

    async def aclose(self) -> None:
        """Stop vLLM's processes. A later request starts them again with the weights and
        adapters this engine last had (as the hf engine's worker restarts), on the caller's
        event loop: a trainer closes its engine at the end of a run and may evaluate after."""
        if not self.closed:
            self.closed = True
            self.engine.shutdown()

    async def _running(self) -> None:
        """Start vLLM again after `aclose`, with the last synced weights and the loaded
        adapters (one restart, whatever the number of requests waiting on it)."""
        if not self.closed:
            return
        lock = self._restarting.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if not self.closed:
                return
            import vllm

            self.engine = vllm.AsyncLLMEngine.from_engine_args(self.args)
            self.closed = False
            if self._weights is not None:
                await self._load(self._weights)
            for request in self._adapters.values():
                await self.engine.add_lora(request)
