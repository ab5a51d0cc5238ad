"""Low-rank adapters: their settings (the run's `lora` section, and a learned PRM's) and the
one place a model is wrapped in them. Light on purpose: the config imports it, so peft and
torch load only when a model is wrapped."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from toolgym.config import ConfigModel
from toolgym.errors import ConfigError, one_line


class LoraSection(ConfigModel):
    enabled: bool = False
    """Train a LoRA adapter instead of every weight (needed by engine.kind=openai)."""
    r: int = Field(16, ge=1)
    """The adapter's rank."""
    alpha: int = Field(32, ge=1)
    """The adapter's scale numerator (its update is scaled by alpha / r)."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """The linear layers that get adapters."""


def with_lora(model: Any, lora: LoraSection, setting: str = "lora") -> Any:
    """`model` with an adapter on `lora.target_modules`, only the adapter trainable; a
    target the model lacks is a ConfigError naming `setting` and the model's linear layers."""
    import torch
    from peft import LoraConfig, get_peft_model

    adapter = LoraConfig(r=lora.r, lora_alpha=lora.alpha, target_modules=lora.target_modules)
    try:
        return get_peft_model(model, adapter)
    except ValueError as exc:  # a target module the model does not have
        linear = sorted(
            {
                n.rpartition(".")[2]
                for n, m in model.named_modules()
                if isinstance(m, torch.nn.Linear)
            }
        )
        raise ConfigError(
            f"{setting}.target_modules={lora.target_modules}: {one_line(exc, 200)} "
            f"(this model's linear layers: {', '.join(linear)})"
        ) from None
