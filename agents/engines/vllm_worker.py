"""Runs inside vLLM's workers (named by `worker_extension_cls`): loads the weights the
trainer sends over `collective_rpc` with the model's own `load_weights`, which maps
transformers parameter names onto vLLM's fused layers."""

from __future__ import annotations

from typing import Any


class WeightLoader:
    model_runner: Any  # the worker's, set by vLLM on the class this extends

    def load_named_weights(self, named: list[tuple[str, Any]]) -> None:
        device = next(self.model_runner.model.parameters()).device
        self.model_runner.model.load_weights(weights=[(n, t.to(device)) for n, t in named])
