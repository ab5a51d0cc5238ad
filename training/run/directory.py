"""A run's directory: what a run writes there and reads back. Claiming it for a new run, the
config it ran with, each step's checkpoint with the states of the parts beside the weights,
a sample of each step's rollouts, the trained policy as a model directory (with the env
settings later commands play it on), and reading it all back on resume."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolgym.agents.trajectory import Trajectory, write_jsonl
from toolgym.agents.vision import ImageEncoder
from toolgym.envs.saved_settings import write_env_settings
from toolgym.errors import ConfigError, one_line
from toolgym.training.config import TrainConfig
from toolgym.training.run import checkpoint
from toolgym.training.run.best_policy import BEST_POLICY, beats_best, mark_best
from toolgym.training.run.files import (
    EVALUATIONS,
    METRICS,
    ROLLOUTS,
    RUN_LOG,
    SUMMARY,
    eval_rollouts_path,
    rollouts_path,
)

RUN_FILES = (
    checkpoint.FILE, checkpoint.SHARDS, METRICS, "tensorboard", "policy", BEST_POLICY,
    "config.json", ROLLOUTS, EVALUATIONS, RUN_LOG, SUMMARY, "wandb", "wandb_id", "mlruns",
    "mlflow_run_id",
)  # fmt: skip
"""What a run writes into its directory."""


class HasState(Protocol):
    """A part whose state a checkpoint carries (a reward source, a group builder, a stream)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class SavedPolicy:
    """What a policy's model directory is written from."""

    model: Any
    tokenizer: Any
    images: ImageEncoder | None
    state_dict: dict[str, Any] | None = None
    """The weights whole, where the model holds one rank's shard of them."""


class RunDirectory:
    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.path = Path(config.run_dir)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"run_dir {self.path} is a file; give a directory for the run")

    def claim(self, overwrite: bool) -> None:
        """A new run: refuse a directory that holds one (unless `overwrite`, which removes
        what it holds), then write the config the run trains with."""
        check_run_dir(self.path, overwrite)
        for name in held_run_files(self.path):
            target = self.path / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        (self.path / "config.json").write_text(self.config.model_dump_json(indent=2))

    def save_checkpoint(self, step: int, weights: dict[str, Any], states: dict[str, Any]) -> None:
        """Step `step`'s weights (`Learner.weights_state`) and the states of the parts
        beside them, which `restore_parts` hands back on resume."""
        checkpoint.save(self.path, step=step, weights=weights, extra=states)

    def load_checkpoint(self) -> dict[str, Any]:
        """The latest checkpoint (verified; a step past the run's steps is refused)."""
        if not checkpoint.exists(self.path):
            raise ConfigError(f"no checkpoint in {self.path} to resume from")
        return checkpoint.load(self.path, self.config.steps)

    def restore_parts(self, state: dict[str, Any], parts: dict[str, HasState]) -> None:
        """Each part's state from the checkpoint's (none saved: the part's own start)."""
        try:
            for name, part in parts.items():
                part.load_state_dict(state["extra"].get(name, {}))
        except (RuntimeError, ValueError, KeyError) as exc:
            raise checkpoint.CheckpointError(
                f"{self.path / checkpoint.FILE}: the states of its {', '.join(parts)} do not "
                f"fit this run: {one_line(exc)}"
            ) from None

    def keep_rollouts(self, step: int, trajectories: list[Trajectory]) -> list[Trajectory]:
        """A sample of the step's trajectories, scored, for `toolgym rollouts show` and
        `toolgym view`: whole groups (their members' credit is read side by side), the fewest
        spread evenly over the step's that hold `rollouts_kept` episodes. Returns the sample."""
        kept = self.config.rollouts_kept
        if not kept or not trajectories:
            return []
        groups: dict[str, list[Trajectory]] = {}
        for t in trajectories:
            groups.setdefault(t.group_id, []).append(t)
        members = list(groups.values())
        for count in range(1, len(members) + 1):  # the fewest evenly spread groups that hold it
            chosen = [members[i * len(members) // count] for i in range(count)]
            if sum(map(len, chosen)) >= kept:
                break
        sample = [t for group in chosen for t in group]
        write_jsonl(sample, rollouts_path(self.path, step))
        return sample

    def keep_evaluation(self, step: int, trajectories: list[Trajectory]) -> Path | None:
        """The evaluation after `step` steps, whole, when it holds at most `eval.kept`
        episodes (a larger one is left out: its figures are in the metrics)."""
        kept = self.config.eval.kept
        if not kept or not trajectories or len(trajectories) > kept:
            return None
        return write_jsonl(trajectories, eval_rollouts_path(self.path, step))

    def save_policy(self, policy: SavedPolicy, name: str = "policy") -> Path:
        """The trained policy as a model directory (`toolgym eval --model RUN_DIR/policy`);
        under LoRA, the adapter, which peft loads onto the base model."""
        path = self.path / name
        whole = {} if policy.state_dict is None else {"state_dict": policy.state_dict}
        policy.model.save_pretrained(path, **whole)
        policy.tokenizer.save_pretrained(path)
        if policy.images is not None:  # a vision-language model reads images through it
            policy.images.processor.save_pretrained(path)
        if not self.config.envs:  # one env: later commands play the policy as it was trained
            env = self.config.env
            schemas = self.config.rollout.tool_schemas_in_prompt
            write_env_settings(path, env.id, dict(env.kwargs), schemas)
        return path

    def keep_if_best(self, record: dict[str, Any], policy: Callable[[], SavedPolicy]) -> None:
        """Under eval.keep_best, save the policy as RUN_DIR/best_policy when this evaluation
        (in `record`) beats every earlier one."""
        success = record["eval/success"]
        if self.config.eval.keep_best and beats_best(self.path, success):
            mark_best(self.save_policy(policy(), BEST_POLICY), record["step"], success)


def held_run_files(run_dir: Path) -> list[str]:
    return [n for n in RUN_FILES if (run_dir / n).exists()]


def check_run_dir(run_dir: str | Path, overwrite: bool) -> None:
    """Refuse a new run in a directory that holds one, unless told to start over; the CLI
    asks before anything loads, the run directory again before it writes."""
    held = held_run_files(Path(run_dir))
    if held and not overwrite:
        raise ConfigError(
            f"{run_dir} already holds a run ({', '.join(held)}); continue it with "
            "--resume, or start over with --overwrite"
        )
