"""Runs inside vLLM's workers (named by `worker_extension_cls`): loads the weights the
trainer wrote to a safetensors file through the worker's own in-place `reload_weights`,
which maps transformers parameter names onto vLLM's fused layers, through LoRA layers'
wrappers, and redoes the kernel layouts the CPU backend packs weights into after loading
(a plain `model.load_weights` finds those parameters emptied).

The tensors travel as a file, not as `collective_rpc` arguments: vLLM's message encoding
turns tensors nested in arguments into lists, and a file in shared memory costs one copy
whatever the model's size."""

from __future__ import annotations

from typing import Any


class WeightLoader:
    model_runner: Any  # the worker's, set by vLLM on the class this extends
    reload_weights: Any  # the worker's own method

    def load_weights_file(self, path: str) -> int:
        """Load every tensor in `path`; the number loaded, so the caller can check it."""
        from safetensors import safe_open

        model = self.model_runner.model
        shared = shared_parameters(model)
        device = str(next(model.parameters()).device)
        with safe_open(path, framework="pt", device=device) as tensors:
            names = list(tensors.keys())
            self.reload_weights(weights_iterator=((n, tensors.get_tensor(n)) for n in names))
        retie(shared)
        return len(names)


Holder = tuple[Any, str, Any]
"""(module, attribute name, the parameter it held before the reload)."""


def shared_parameters(model: Any) -> list[list[Holder]]:
    """The parameters more than one module holds (a head tied to the embeddings)."""
    holders: dict[int, list[Holder]] = {}
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            holders.setdefault(id(parameter), []).append((module, name, parameter))
    return [group for group in holders.values() if len(group) > 1]


def retie(shared: list[list[Holder]]) -> None:
    """Tie again what the reload untied, and prepare the tied modules again as after a
    load: the reload prepares the module it loaded, and a tied head (never loaded itself)
    would keep generating with its old preparation (on the CPU, its matrix packed for the
    kernel)."""
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    for group in shared:
        fresh = [getattr(m, n) for m, n, old in group if getattr(m, n) is not old]
        for module, name, _ in group:
            if fresh:
                setattr(module, name, fresh[0])
            if isinstance(module, VocabParallelEmbedding):
                module.quant_method.process_weights_after_loading(module)
