"""The `vllm` engine: vLLM's asynchronous engine in this process (GPU machines).

Written against vLLM's documented API (`AsyncLLMEngine.from_engine_args`, `generate` with a
`TokensPrompt`, `LoRARequest`, `add_lora`). Install with `pip install toolgym[vllm]`; without
vLLM, building this engine raises an ImportError that says so. Prompts go in as token ids
and the completion's ids and sampled-token logprobs come back as vLLM produced them (vLLM
reports raw logprobs, before temperature and top-p, by default since its V1 engine).

Weight sync is full weights (`Capabilities("full")`): `update_weights(state_dict)` sends the
trained tensors to every worker through vLLM's `collective_rpc`, where a worker extension
(vllm_worker.py) loads them with the model's own `load_weights`. LoRA adapters work too:
`load_adapter(name, path)` registers a trained adapter and requests naming it use it;
`unload_adapter(name)` removes it (`remove_lora`).
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any, ClassVar

from toolgym.agents.engines.base import (
    Capabilities,
    Completion,
    EngineError,
    PolicyContext,
    SamplingParams,
)


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(
            "the vllm engine needs vLLM: pip install 'toolgym[vllm]' (on a GPU machine)"
        ) from exc
    return vllm


WORKER_EXTENSION = "toolgym.agents.engines.vllm_worker:WeightLoader"


class VLLMEngine:
    capabilities: ClassVar[Capabilities] = Capabilities(
        "full", full_weights=True, adapters=True, needs=("vllm", "cuda")
    )

    @classmethod
    def for_policy(cls, context: PolicyContext) -> VLLMEngine:
        """The engine a trainer generates with: the policy's weights, updated in place."""
        return cls(context.model_path)

    def __init__(
        self, model: str, *, enable_lora: bool = True, max_lora_rank: int = 64, **engine_args: Any
    ) -> None:
        vllm = _import_vllm()
        engine_args.setdefault("worker_extension_cls", WORKER_EXTENSION)
        args = vllm.AsyncEngineArgs(
            model=model, enable_lora=enable_lora, max_lora_rank=max_lora_rank, **engine_args
        )
        self.engine = vllm.AsyncLLMEngine.from_engine_args(args)
        self.tokenizer = (
            None  # render with the model's own tokenizer (AutoTokenizer.from_pretrained(model))
        )
        self._adapters: dict[str, Any] = {}
        self._adapter_ids = itertools.count(1)

    async def generate(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        adapter: str | None = None,
        images: list[str] | None = None,
    ) -> Completion:
        if images:
            raise EngineError(
                "images in the prompt: this engine passes no multi-modal data to vLLM yet; generate with the hf engine for a "
                "vision-language model"
            )
        vllm = _import_vllm()
        from vllm.inputs import TokensPrompt

        params = vllm.SamplingParams(
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop=sampling.stop or None,
            stop_token_ids=sampling.stop_token_ids or None,
            seed=sampling.seed,
            logprobs=sampling.top_logprobs,
        )
        lora = self._adapters.get(adapter) if adapter else None
        if adapter and lora is None:
            raise EngineError(f"no LoRA adapter named '{adapter}' is loaded")
        final = None
        async for output in self.engine.generate(
            TokensPrompt(prompt_token_ids=list(prompt_ids)),
            params,
            uuid.uuid4().hex,
            lora_request=lora,
        ):
            final = output
        if final is None or not final.outputs:
            raise EngineError("vLLM returned no output")
        out = final.outputs[0]
        ids = list(out.token_ids)
        logprobs = [
            float(step[token].logprob) for step, token in zip(out.logprobs or [], ids, strict=True)
        ]
        return Completion(
            ids,
            logprobs,
            out.text,
            "length" if out.finish_reason == "length" else "stop",
            prompt_tokens=len(prompt_ids),
        )

    async def update_weights(self, state_dict: dict[str, Any]) -> None:
        """Load the trained weights into every worker."""
        named = [(name, tensor.detach().cpu()) for name, tensor in state_dict.items()]
        await self.engine.collective_rpc("load_named_weights", args=(named,))
        await self.engine.reset_prefix_cache()

    async def load_adapter(self, name: str, path: str) -> None:
        from vllm.lora.request import LoRARequest

        request = LoRARequest(name, next(self._adapter_ids), path)
        await self.engine.add_lora(request)
        self._adapters[name] = request

    async def unload_adapter(self, name: str) -> None:
        request = self._adapters.pop(name, None)
        if request is None:
            raise EngineError(f"no LoRA adapter named '{name}' is loaded")
        await self.engine.remove_lora(request.lora_int_id)

    async def aclose(self) -> None:
        shutdown = getattr(self.engine, "shutdown", None)
        if callable(shutdown):
            shutdown()
