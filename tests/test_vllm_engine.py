"""The in-process vLLM engine. vLLM needs a GPU and its wheel does not fit these machines, so
this runs only where vLLM is installed; the HTTP path (test_openai_engine.py) covers vLLM's
server protocol everywhere."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from toolgym.agents.engines import SamplingParams, make_engine

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_without_vllm_the_engine_says_how_to_get_it():
    if HAS_VLLM:
        pytest.skip("vLLM is installed here")
    with pytest.raises(ImportError, match=r"pip install 'toolgym\[vllm\]'"):
        make_engine("vllm", model="unused")


@pytest.mark.skipif(
    not HAS_VLLM, reason="vLLM is not installed (GPU-only; pip install 'toolgym[vllm]')"
)
def test_vllm_generates_ids_and_logprobs(tiny_model_dir):
    engine = make_engine(
        "vllm", model=str(tiny_model_dir), enforce_eager=True, gpu_memory_utilization=0.3
    )

    async def main():
        try:
            return await engine.generate([5, 6, 7], SamplingParams(max_tokens=8, seed=0))
        finally:
            await engine.aclose()

    completion = asyncio.run(main())
    assert len(completion.token_ids) == len(completion.logprobs) > 0
