"""The implicit PRM's settings, apart from its model code so that a config checks them without
loading torch (training/rewards/prm_reward.py is the source itself)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from toolgym.config import Choices, ConfigModel
from toolgym.training.lora import LoraSection
from toolgym.training.process.implicit_prm import BETA
from toolgym.training.schedule import DECAYS


class PRMSettings(ConfigModel):
    """The settings of `{source: implicit_prm, scores: process, kwargs: {...}}`, a process
    reward model learned online from outcomes (training/rewards/prm_reward.py)."""

    model: str | None = None
    """Where its weights start (default: the policy's starting model)."""
    beta: float = Field(BETA, gt=0)
    """The scale of its log-ratios, in the DPO loss and in the step rewards."""
    lr: float = Field(1e-4, gt=0)
    """Its AdamW learning rate."""
    warmup_steps: int = Field(0, ge=0)
    """Training steps of linear warm-up from 0 to lr."""
    schedule: Annotated[str, Choices(DECAYS)] = "constant"
    """How its learning rate moves after warm-up, over the run's steps (to 0)."""
    grad_clip: float = Field(1.0, gt=0)
    """Largest global gradient norm of its update."""
    micro_batch_size: int = Field(8, ge=1)
    """Sequences per forward/backward pass."""
    prefer: Literal["success", "return"] = "success"
    """What makes one trajectory of a group preferred to another: success over failure
    (an outcome return above 0), or a higher outcome return. The return is the sum of the
    run's outcome rewards (those with scores: outcome)."""
    lora: LoraSection | None = None
    """Train a LoRA adapter on its weights instead of all of them: {r, alpha,
    target_modules}, as in the run's lora section."""
