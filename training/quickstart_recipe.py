"""The quickstart's recipe, as data: its env, the SFT demonstrations' env, the held-out and
transfer sets it is evaluated on, and the RL settings (`toolgym quickstart` runs it; benches
and tests that rerun its stages read it here, not from the CLI)."""

from __future__ import annotations

import json

from toolgym.errors import ConfigError

ENV_ID = "toolgym/Maze-v0"
ENV_ARGS = {
    "size": 3, "n_doors": 0, "far_goal": False, "max_turns": 6, "invalid_action_reward": -0.2
}  # fmt: skip
SFT_ENV_ARGS = {**ENV_ARGS, "solver_slips": 0.5}
"""The demonstrations' env: the solver slips once in half its episodes."""
TEST = {"name": "test", "id": ENV_ID, "kwargs": ENV_ARGS, "split": "test", "episodes": 107}
"""The held-out mazes of the test split, played beside the eval split's: 91 mazes alone give
each rate an interval about 20 points wide."""
TRANSFER = {"name": "4x4", "id": ENV_ID, "kwargs": {**ENV_ARGS, "size": 4}, "plays": 1}
"""Larger mazes than any the policy trained on, evaluated beside the held-out 3x3 ones, once
each (the quickstart's time goes to the held-out rows)."""
PLAYS = 3
"""Plays of each held-out maze at temperature 1: three samples of a maze narrow a row's
interval from about 14 points to 11 (an interval over mazes: most of its width is which
mazes are held out, so more plays add little); greedy decoding plays a maze one way."""
EVAL_PLAYS = {1.0: PLAYS, 0.0: 1}
EVAL_EPISODES = 91
"""The eval split's mazes, all it holds (and of the 4x4 transfer set as many); with the test
split's 107, 198 held-out 3x3 mazes."""
RECIPE = [
    "rollout.tasks_per_step=16",
    "rollout.rollouts_per_task=4",
    "rollout.max_tokens=32",
    "rollout.tool_schemas_in_prompt=false",
    "advantage.centre_turns=true",  # the call format gets no net push (configs/maze_gigpo.yaml)
    "optim.lr=5e-4",
    "optim.micro_batch_size=16",
    "optim.minibatches=4",
    "rollout.concurrency=256",  # an evaluation's episodes at once: three plays of 198 mazes
    f"eval.plays={PLAYS}",
    "eval.every_steps=40",  # once, after the last step: the table's trained row
    "eval.at_start=true",  # and before the first: the SFT row, and the run's own start
    "eval.kept=1024",  # each kept whole (685 episodes): the table reads the start's back
    f"eval.episodes={EVAL_EPISODES}",
    "eval.temperature=1.0",
    f"eval.sets=[{json.dumps(TEST)}, {json.dumps(TRANSFER)}]",
]
ENGINE_SIZES = {"hf": "tiny", "vllm": "mini"}
"""The model size each engine trains unless told (vLLM's CPU attention runs no head smaller
than 32, and `tiny`'s are 16)."""


def model_size(engine: str, size: str | None) -> str:
    """The size the quickstart builds for `engine` (`size` when given)."""
    if engine not in ENGINE_SIZES:
        raise ConfigError(f"--engine {engine!r}: choose {' or '.join(ENGINE_SIZES)}")
    return size or ENGINE_SIZES[engine]
