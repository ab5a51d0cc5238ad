"""The bake-off: credit-assignment methods x horizons x seeds at equal env steps.

It writes the tables of docs/which-method.md from its runs, so a bigger machine reruns the
page with one command.

    python bench/bake_off.py [--tables scale calls estimators process] [--horizons long short]
        [--seeds 3] [--steps 40] [--methods LABEL ...] [--out runs/bake-off]
        [--doc docs/which-method.md]
        [--model-long DIR] [--model-short DIR] [section.field=value ...]

Each table compares methods (named override sets) against its first, the reference. In each
seed the reference trains `--steps` updates and evaluates at its start and end; every other
method trains until it has spent the env steps the reference spent in that seed
(`max_env_steps`, Monte-Carlo branches counted), then evaluates. The figures are held-out
success at the end (items training never drew) per seed, the mean over seeds with its 95%
interval, each method's difference from the reference paired by seed, and the least
valid-call rate of any training step (a method that breaks calls shows it there).

Each finished run leaves a record under `--records` (committed beside this file): its
figures, each held-out item's success at the end, and a digest of the settings it ran with.
A record is reused wherever the same settings are asked for again (every table's reference,
GiGPO as the recipe has it, is trained once a seed), so a stopped bake-off goes on where it
stopped, and a later session rewrites the tables without training what is recorded. A
changed default changes the digest, and that run trains again, unless the setting acts on
nothing in it (how process rewards join, in a run without any). The runs themselves train
under `--out`. The tables go into the doc between the markers
`<!-- bake-off TABLE HORIZON -->` and `<!-- /bake-off -->` (added at the end of the doc when
missing), with the command that made them.

The horizons' start models are made as their configs' headers say: the quickstart's SFT
policy (`runs/quickstart/sft`, made by `make quickstart`) and the far-goal one
(`runs/sft-far`, configs/maze_far_gigpo.yaml).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from common import ADDED, MC, PRM

from toolgym.agents.collector import item_success
from toolgym.config import load_config
from toolgym.intervals import mean_interval, pair, paired_difference
from toolgym.training.config import TrainConfig
from toolgym.training.run.files import eval_rollouts_path
from toolgym.training.run.metrics import env_steps_spent

ROOT = Path(__file__).parent.parent
CONFIGS = ROOT / "configs"


@dataclass(frozen=True)
class Horizon:
    config: Path
    model: str
    says: str


HORIZONS = {
    "short": Horizon(CONFIGS / "maze_gigpo.yaml", "runs/quickstart/sft",
                     "the quickstart's 3x3 mazes, about three moves to the goal"),
    "long": Horizon(CONFIGS / "maze_far_gigpo.yaml", "runs/sft-far",
                    "3x3 mazes whose goal is farthest from the start: 2 to 8 moves, median 5"),
}  # fmt: skip
REFERENCE = "GiGPO"
"""Every table's first method: the horizon's recipe as it is, trained once a seed for all."""
TABLES: dict[str, dict[str, list[str]]] = {
    "scale": {
        REFERENCE: [],
        "scale floor, 0.5": ["advantage.scale=floor", "advantage.std_floor=0.5"],
        "scale none (Dr. GRPO)": ["advantage.scale=none"],
        "scale batch": ["advantage.scale=batch"],
    },
    "calls": {
        REFERENCE: [],
        "turns not centred": ["advantage.centre_turns=false"],
        "target_kl 0.05": ["optim.target_kl=0.05"],
        "target_kl 0.05, lr warm-up 3 steps": ["optim.target_kl=0.05", "optim.warmup_steps=3"],
    },
    "estimators": {
        REFERENCE: [],
        "GRPO": ["advantage.estimator=grpo"],
        "RLOO": ["advantage.estimator=rloo"],
    },
    "process": {
        REFERENCE: [],
        "+ implicit PRM, redistributed": [
            f"rewards=[{{source: env}}, {PRM}]",
            "advantage.step_combine=redistribute",
            "advantage.step_alpha=0.5",
        ],
        "+ Monte-Carlo values": [f"rewards=[{{source: env}}, {MC}]", ADDED],
        "+ Monte-Carlo values where GiGPO compares nothing": [
            f"rewards=[{{source: env}}, {MC.replace('entropy:2', 'alone')}]",
            ADDED,
        ],
    },
}
"""Each table's methods: a label and the overrides that make the method from the horizon's
recipe; the first, the reference, the others are measured against."""


@dataclass
class Result:
    """One run's figures: held-out success at its start and end, the least valid-call rate of
    a training step, its updates and env steps, and each held-out item's success at the end
    (to pair two methods' ends maze by maze within a seed)."""

    start: float | None
    end: float
    least_valid: float
    updates: int
    env_steps: float
    items: dict[str, float]


def digest(config: TrainConfig) -> str:
    """A digest of the settings that act in the run: how process rewards join the advantage
    is left out of a run that has none, so a new default there trains nothing again."""
    settings = config.model_dump(mode="json", exclude={"run_dir"})
    if all(r.scores != "process" for r in config.rewards):
        for name in ("step_combine", "step_alpha"):
            del settings["advantage"][name]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def train(run: Path, record: Path, config_path: Path, overrides: list[str]) -> Result:
    """The run's figures from its record when one was made with the same settings (as the
    config resolves them today: a changed default trains again); else train it, and record."""
    config = load_config(TrainConfig, config_path, [f"run_dir={run}", *overrides])
    settings = digest(config)
    if record.is_file() and (kept := json.loads(record.read_text()))["settings"] == settings:
        return Result(**kept["result"])
    from toolgym.training.trainer import Trainer

    Trainer(config).run(overwrite=True)
    result = figures(run, config)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({
        "config": config_path.relative_to(ROOT).as_posix(), "overrides": overrides,
        "settings": settings, "result": asdict(result),
    }, indent=1) + "\n")  # fmt: skip
    return result


def figures(run: Path, config: TrainConfig) -> Result:
    """A finished run's figures, from its summary, metrics and last evaluation's episodes."""
    from toolgym.agents.trajectory import read_jsonl

    summary = json.loads((run / "summary.json").read_text())
    if not str(summary.get("status")).startswith("finished") or not summary.get("end"):
        raise SystemExit(f"{run}: the run did not finish ({summary.get('status')})")
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "rollout/success" in r]
    others = {s.name for s in config.eval.sets} - set(config.held_out_sets)
    played = read_jsonl(eval_rollouts_path(run, len(steps)))
    return Result(
        start=summary["start"]["success"] if summary.get("start") else None,
        end=summary["end"]["success"],
        least_valid=min(r.get("rollout/valid_actions", 1.0) for r in steps),
        updates=len(steps),
        env_steps=sum(env_steps_spent(r) for r in steps),
        items={item: round(rate, 4) for item, rate in
               sorted(item_success(t for t in played if t.env_name not in others).items())},
    )  # fmt: skip


def bake(args: argparse.Namespace, table: str, horizon: str) -> dict[str, list[Result]]:
    """Every method of `table` at `horizon`, seed by seed (the reference first in each)."""
    setting = HORIZONS[horizon]
    model = getattr(args, f"model_{horizon}") or setting.model
    methods = {name: method for name, method in TABLES[table].items()
               if name == REFERENCE or not args.methods or name in args.methods}  # fmt: skip
    results: dict[str, list[Result]] = {name: [] for name in methods}
    for seed in range(args.seeds):
        budget: list[str] = []
        for index, (name, method) in enumerate(methods.items()):
            run = Path(horizon) / f"{slug(name)}-seed{seed}"
            overrides = [
                f"model={model}", f"seed={seed}", f"steps={args.steps}",
                "eval.every_steps=1000000", f"eval.at_start={index == 0}", "eval.kept=100000",
                "tensorboard=false", *method, *args.overrides, *budget,
            ]  # fmt: skip
            result = train(args.out / run, (args.records / run).with_suffix(".json"),
                           setting.config, overrides)  # fmt: skip
            results[name].append(result)
            print(f"{table} {horizon} seed {seed} {name}: held out {result.end:.1%}, "
                  f"{result.updates} updates, {result.env_steps:.0f} env steps, least valid "
                  f"calls {result.least_valid:.2f}", flush=True)  # fmt: skip
            if index == 0:
                budget = [f"steps={4 * args.steps}", f"max_env_steps={int(result.env_steps)}"]
    return results


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def percent(figure: tuple[float, float, float], signed: bool = False) -> str:
    """A mean and its interval, in percent or (`signed`) in points."""
    mean, low, high = (100 * x for x in figure)
    sign, unit = ("+", "") if signed else ("", "%")
    if low == -float("inf"):
        return f"{mean:{sign}.1f}{unit} (one seed)"
    if high - low < 1e-9:
        return f"{mean:{sign}.1f}{unit} (in every seed)"
    return f"{mean:{sign}.1f}{unit} ({low:{sign}.1f} to {high:{sign}.1f})"


def markdown(table: str, horizon: str, results: dict[str, list[Result]], command: str) -> str:
    """The table of one bake-off, with the command that made it and the start it began from."""
    reference, *_ = results
    base = [r.end for r in results[reference]]
    starts = [r.start for r in results[reference] if r.start is not None]
    lines = [
        f"`{command}` ({HORIZONS[horizon].says}; {len(base)} seeds, each method given the env "
        f"steps the reference spent in its seed; held-out success at the start "
        f"{percent(mean_interval(starts))}):",
        "",
        f"| method | held out at the end, by seed | mean (95% over seeds) | minus {reference}, "
        f"paired by seed | minus {reference} by seed, paired by item (95%) "
        "| least valid calls in a step, by seed | updates |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        ends = [r.end for r in runs]
        against = by_seed = ""
        if name != reference:
            against = percent(paired_difference(ends, base), True)
            by_seed = "; ".join(percent(by_item(r, b), True)
                                for r, b in zip(runs, results[reference], strict=True))  # fmt: skip
        lines.append(
            f"| {name} | {', '.join(f'{e:.1%}' for e in ends)} | {percent(mean_interval(ends))} "
            f"| {against} | {by_seed} | {', '.join(f'{r.least_valid:.2f}' for r in runs)} "
            f"| {', '.join(str(r.updates) for r in runs)} |"
        )
    return "\n".join(lines)


def by_item(run: Result, reference: Result) -> tuple[float, float, float]:
    """`run`'s held-out success minus the reference's in the same seed, paired item by item:
    the interval of one seed's difference, over the items both played."""
    paired = pair(reference.items, run.items)
    return paired_difference(paired.after, paired.before)


def write(doc: Path, table: str, horizon: str, text: str) -> None:
    """Put `text` between the doc's markers for this table (appended when it has none)."""
    opening, closing = f"<!-- bake-off {table} {horizon} -->", "<!-- /bake-off -->"
    page = doc.read_text()
    block = f"{opening}\n{text}\n\n{closing}"  # a blank line ends the table before the marker
    pattern = re.compile(re.escape(opening) + r".*?" + re.escape(closing), re.S)
    if pattern.search(page):
        page = pattern.sub(lambda _: block, page)
    else:
        page = page.rstrip("\n") + f"\n\n## Bake-off: {table}, {horizon} horizon\n\n{block}\n"
    doc.write_text(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    parser.add_argument("--horizons", nargs="+", choices=list(HORIZONS), default=["long"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--methods", nargs="+", help="only these of each table's methods (and its reference)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bake-off"))
    parser.add_argument("--records", type=Path, default=ROOT / "bench" / "results" / "bake-off")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "which-method.md")
    for name, setting in HORIZONS.items():
        parser.add_argument(f"--model-{name}", help=f"start model (default {setting.model})")
    parser.add_argument("overrides", nargs="*", help="section.field=value settings for all")
    args = parser.parse_args()
    offered = {name for table in args.tables for name in TABLES[table]}
    if unknown := set(args.methods or ()) - offered:
        parser.error(f"--methods: no table asked for has {sorted(unknown)}; they have "
                     f"{sorted(offered)}")  # fmt: skip
    for horizon in args.horizons:
        model = getattr(args, f"model_{horizon}") or HORIZONS[horizon].model
        if not (Path(model) / "config.json").is_file():
            parser.error(f"no model at {model}: make it as {HORIZONS[horizon].config.name}'s "
                         f"header says, or name it with --model-{horizon}")  # fmt: skip
    for table in args.tables:
        for horizon in args.horizons:
            results = bake(args, table, horizon)
            command = (f"python bench/bake_off.py --tables {table} --horizons {horizon} "
                       f"--seeds {args.seeds} --steps {args.steps}")  # fmt: skip
            if args.methods:
                command += " --methods " + " ".join(f"'{m}'" for m in args.methods)
            if args.overrides:
                command += " " + " ".join(args.overrides)
            text = markdown(table, horizon, results, command)
            print(text)
            write(args.doc, table, horizon, text)
            print(f"written to {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
