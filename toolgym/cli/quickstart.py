"""`toolgym quickstart`, the README's main job: a tiny model trains on Maze on CPU, end to end.

    init  a tiny model with a tokenizer trained here (nothing is downloaded)
    sft   imitate a weaker demonstrator on 1,500 3x3 mazes for 6 epochs, 8 episodes a step:
          the scripted solver, which in half its episodes makes one wrong move and walks it
          back (`solver_slips`). It teaches the tool-call format and reading the maze, which
          takes steps, not data: the move's loss sits at a uniform guess among four for the
          first few hundred optimizer steps (bench/maze_reading.py); and it leaves RL a
          demonstrator to surpass (the slip-free solver's student leaves little: RL then
          only sharpens its sampling towards what greedy decoding already did)
    rl    GiGPO from the SFT policy, 16 mazes x 4 rollouts per step in 4 mini-batches (four
          clipped updates per batch), a format term of -0.2 per malformed turn; the run
          evaluates at its start too, so its summary and `toolgym view` show the lift
    eval  the SFT and RL policies on the same held-out mazes (3x3 mazes training never drew:
          the env splits its mazes by content; its eval and test splits, 198 mazes), sampled
          at the training temperature (three plays a maze) and greedy, and on larger 4x4
          mazes neither ever saw (a transfer set); the trained policy's change in success is
          paired maze by maze, with its 95% interval

3x3 mazes whose goal is any cell are 1,008 distinct mazes, a tenth held out for eval and a
tenth for test; the 2x2 mazes of earlier versions were 8, so "held-out" mazes were training's.

Writes OUT/base, OUT/sft, OUT/rl (metrics.jsonl, TensorBoard, policy/), OUT/curves.png and
OUT/results.json (the table's numbers, keyed by sampling temperature).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from toolgym.cli.show import console, show_message
from toolgym.cli.tables import print_table
from toolgym.intervals import pair, paired_difference, percent
from toolgym.training.quickstart_recipe import (
    ENV_ARGS,
    ENV_ID,
    EVAL_PLAYS,
    RECIPE,
    SFT_ENV_ARGS,
    model_size,
)

if TYPE_CHECKING:
    from toolgym.agents.trajectory import Trajectory

KINDS = {"held-out": ("Maze-v0", "test"), "4x4": ("4x4",)}
"""The table's kinds of maze, by the env names their episodes carry."""


def quickstart_command(
    out: Path, steps: int, seed: int, engine: str = "hf", size: str | None = None
) -> int:
    from toolgym.agents.models.fresh import init_model
    from toolgym.agents.trajectory import read_jsonl
    from toolgym.cli.progress import TrainSteps
    from toolgym.cli.train import sft_command
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig
    from toolgym.training.run.files import eval_rollouts_path
    from toolgym.training.trainer import Trainer

    size = model_size(engine, size)
    console.rule(f"1/4 a {size} model")
    base = init_model(out / "base", size=size, seed=seed)
    console.rule("2/4 supervised warm start on scripted demonstrations")
    env_args = [f"{k}={json.dumps(v)}" for k, v in SFT_ENV_ARGS.items()]
    sft_command(
        ENV_ID, base, out / "sft", episodes=1500, epochs=6, lr=3e-3, batch_size=8, seed=seed,
        env_args=env_args, tool_schemas=False,
    )  # fmt: skip
    config = load_config(
        TrainConfig,
        None,
        [f"model={out / 'sft'}", f"run_dir={out / 'rl'}", f"steps={steps}", f"seed={seed}"]
        + [f"env.id={ENV_ID}", f"env.kwargs={ENV_ARGS}", f"engine.kind={engine}", *RECIPE],
    )
    trainer = Trainer(config)
    greedy = {  # the run evaluates at eval.temperature itself, at its start
        t: trainer.player.evaluation("before RL", t, plays)[1]
        for t, plays in EVAL_PLAYS.items()
        if t != config.eval.temperature
    }
    console.rule(f"3/4 GiGPO for {steps} steps (metrics: {config.run_dir}/metrics.jsonl)")
    with TrainSteps(config.steps) as progress:
        trainer.run(overwrite=True, on_step=progress, on_episode=progress.episode)
    start = read_jsonl(eval_rollouts_path(config.run_dir, 0))  # the run's step 0, kept whole
    before = {t: greedy.get(t, start) for t in EVAL_PLAYS}
    console.rule("4/4 the same held-out mazes, before and after RL")
    assert trainer.last_evaluation is not None  # a run ends with an evaluation
    ran_at, _, played = trainer.last_evaluation  # the trained policy's, at eval.temperature
    after = {
        t: played if t == ran_at else trainer.player.evaluation("after RL", t, plays)[1]
        for t, plays in EVAL_PLAYS.items()
    }
    show_episode(trainer)
    trainer.close()
    facts = {"env": ENV_ID, "env_args": ENV_ARGS, "engine": engine, "model_size": size}
    report(out, Path(config.run_dir), before, after, facts)
    return 0


def report(
    out: Path, run_dir: Path, before: dict[float, Any], after: dict[float, Any],
    facts: dict[str, Any],
) -> None:  # fmt: skip
    """The table, the curves and results.json, from both policies' held-out episodes."""
    from toolgym.training.run.plot import plot_runs

    results: dict[str, Any] = {
        "before_rl": {t: figures(played) for t, played in before.items()},
        "after_rl": {
            t: figures(played) | paired_change(before[t], played) for t, played in after.items()
        },
    }
    print_table(results_table(results["before_rl"], results["after_rl"]), console)
    curves = plot_runs(
        [run_dir],
        out / "curves.png",
        ("rollout/success", "rollout/valid_actions", "held_out/success", "eval/4x4/success"),
    )
    console.print(f"learning curves: [bold]{curves}[/]; trained policy: [bold]{run_dir}/policy[/]")
    (out / "results.json").write_text(json.dumps(results | facts, indent=2))


def of_kind(played: list[Trajectory], kind: str) -> list[Trajectory]:
    return [t for t in played if t.env_name in KINDS[kind]]


def figures(played: list[Trajectory]) -> dict[str, float]:
    """Success with its 95% interval, distinct mazes and the episodes played of each, valid
    calls and turns, per kind of maze: `held-out/...` (both held-out splits) and `4x4/...`."""
    from toolgym.training.player import rollout_metrics

    out: dict[str, float] = {}
    for kind in KINDS:
        chosen = of_kind(played, kind)
        out |= rollout_metrics(kind, chosen, 0.0, [], full=False)
        out[f"{kind}/plays"] = len(chosen) / max(out[f"{kind}/items"], 1)
    return out


def paired_change(before: list[Trajectory], after: list[Trajectory]) -> dict[str, float]:
    """The trained policy's success minus the SFT policy's on the same mazes, paired maze by
    maze, with its 95% interval, per kind of maze."""
    from toolgym.agents.collector import item_success

    out: dict[str, float] = {}
    for kind in KINDS:
        paired = pair(*(item_success(of_kind(played, kind)) for played in (before, after)))
        change, low, high = paired_difference(paired.after, paired.before)
        out |= {f"{kind}/change": change, f"{kind}/change_low": low, f"{kind}/change_high": high}
    return out


def results_table(before: dict[float, Any], after: dict[float, Any]) -> Table:
    """A row per policy, sampling and set of mazes, narrow enough for 80 columns: a set's
    mazes and plays of each in its name (`3x3 held-out, 198 x 3`)."""
    table = Table(title=f"{ENV_ID} {ENV_ARGS}; sampled at temperature t, or greedy")
    for column in ("policy", "sampling", "mazes x plays", "success (95% interval)",
                   "valid calls", "turns", "change (paired by maze)"):  # fmt: skip
        table.add_column(column)
    kinds = (("held-out/", "3x3 held-out"), ("4x4/", "4x4 transfer"))
    for name, results in (("SFT", before), ("SFT + GiGPO", after)):
        for temperature, r in results.items():
            sampling = f"t={temperature:g}" if temperature else "greedy"
            for key, mazes in kinds:
                low, high = r[f"{key}success_low"], r[f"{key}success_high"]
                table.add_row(
                    name,
                    sampling,
                    f"{mazes}, {r[f'{key}items']:g} x {r[f'{key}plays']:g}",
                    percent(r[f"{key}success"], low, high),
                    f"{r[f'{key}valid_actions']:.1%}",
                    f"{r[f'{key}turns']:.2f}",
                    change(r, key),
                )
    return table


def change(r: dict[str, Any], key: str) -> str:
    """`+3.3 (-2.1 to +8.7)` points, or nothing for the SFT rows (the baseline)."""
    if f"{key}change" not in r:
        return ""
    low, high = r[f"{key}change_low"], r[f"{key}change_high"]
    return f"{100 * r[f'{key}change']:+.1f} ({100 * low:+.1f} to {100 * high:+.1f})"


def show_episode(trainer: Any) -> None:
    """One held-out episode of the trained policy, sampled as in training."""
    request = trainer.player.eval_requests()[0]
    group = trainer.player.collect([request], temperature=1.0, sampling_seed=0)[0]
    episode = group.trajectories[0]
    console.rule(f"the trained policy on held-out maze {request.draw.seed}")
    show_message(episode.messages[1])  # the opening map (after the system prompt)
    for step in episode.steps:
        show_message({"role": "assistant", "content": step.action})
        for message in step.observation:
            show_message(message)


def quickstart(
    out: Annotated[
        Path, typer.Option(help="Folder for the models, the run and the curves.")
    ] = Path("runs/quickstart"),
    steps: Annotated[int, typer.Option(help="GiGPO steps.")] = 40,
    seed: Annotated[int, typer.Option(help="Seeds the model, the data and the sampling.")] = 0,
    engine: Annotated[
        str,
        typer.Option(
            help="hf, or vllm (vLLM's CPU build after `make vllm`; the model is then the mini "
            "size, the smallest whose attention heads vLLM's CPU kernels run)."
        ),
    ] = "hf",
    size: Annotated[
        str | None,
        typer.Option(help="The model's size (default: tiny on hf, mini on vllm)."),
    ] = None,
) -> None:
    """The main job: a tiny model trains on Maze on CPU (SFT, then GiGPO), scored on held-out mazes."""

    raise typer.Exit(quickstart_command(out=out, steps=steps, seed=seed, engine=engine, size=size))
