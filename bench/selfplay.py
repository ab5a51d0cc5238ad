"""Self-play against its ablations and the curated recipe, on each domain, over several seeds.

For each domain, one SFT warm start on both roles (`toolgym sft SOLVER --with-env PROPOSER`).
Then, per seed, one run from it per arm, with the same steps and rollout settings:

- self-play: configs/selfplay_DOMAIN.yaml. It has no curated training tasks; the pool's
  references are solved only when too few proposals are valid.
- references only: the same, proposing nothing (`selfplay.proposals=0`): the solver trains
  on the pool's references alone, so self-play's edge over it is what its proposals add.
- frozen proposer: the same, its proposer played but not trained (`selfplay.frozen`), so its
  edge over this is what training the proposer adds.
- curated: the same config without `selfplay`, trained on the solver env's own training tasks.
- snapshot scorer: self-play whose proposers are paid from a frozen copy of the warm start
  (`selfplay.scorer: snapshot`), not from the solvers being trained; snapshot every 5: the
  copy takes the trained weights every 5 updates (R-Zero's alternation). Not in the default
  arms (name them with --arms).

Each run prints held-out solver success (the solver env's eval split, sampled: items
training never drew, by content) at the start (the warm start: no RL) and after its last
step. Last come, per eval set (the held-out split, then the recipe's transfer sets), the
start's and each arm's success over seeds with 95% intervals, and each arm's difference
from references only, paired by seed.

    python bench/selfplay.py --domains maze [--seeds 3] [--steps 40]
    python bench/selfplay.py --base models/pt_tiny [--domains sql sql_edit code] [--arms self-play curated]
        [--sft-episodes 2000] [--sft-epochs 4] [--search-base models/search-mini]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import HeldOut, tiny_model

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.supervised.sft import SFTConfig
from toolgym.training.supervised.warm_start import WarmStart, warm_start

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Domain:
    """A domain's warm start: its two envs, their shared arguments and the fine-tune."""

    solver: str
    proposer: str
    env_args: dict[str, Any] = field(default_factory=dict)
    lr: float = 3e-3
    batch_size: int = 16
    episodes: int | None = None
    """Demonstrations per role (None: --sft-episodes)."""
    epochs: int | None = None
    """Passes over them (None: --sft-epochs)."""
    base: str = "pretrained"
    """Which base it starts from: --base (pretrained), --search-base, or a fresh tiny init."""


SQL = {"style": "tags", "sample_rows": 0, "solver_slips": 0.5, "values": "wide",
       "templates": ["filter_count", "filter_list", "aggregate_state", "ordering"]}  # fmt: skip
MAZE = {"size": 3, "n_doors": 0, "far_goal": False, "max_turns": 6,
        "invalid_action_reward": -0.2, "solver_slips": 0.5}  # fmt: skip
DOMAINS = {
    "sql": Domain("toolgym/SQL-v0", "toolgym/ProposeSQL-v0", SQL),
    "sql_edit": Domain("toolgym/SQL-v0", "toolgym/EditSQL-v0", SQL),
    "code": Domain("toolgym/CodeReason-v0", "toolgym/ProposeCode-v0"),
    "search": Domain("toolgym/Search-v0", "toolgym/ProposeSearch-v0",
                     {"hops": 1, "topk": 1, "doc_chars": 150, "max_turns": 3}, 1e-3,
                     base="search"),
    # the quickstart's warm start (its fresh tiny model, demonstrator and fine-tune)
    "maze": Domain("toolgym/Maze-v0", "toolgym/ProposeMaze-v0", MAZE, batch_size=8,
                   episodes=1500, epochs=6, base="tiny"),
}  # fmt: skip
ARMS = {
    "self-play": [],
    "references only": ["selfplay.proposals=0"],
    "frozen proposer": ["selfplay.frozen=[proposer]"],
    "curated": ["selfplay=null"],
    "snapshot scorer": ["selfplay.scorer=snapshot"],
    "snapshot every 5": ["selfplay.scorer=snapshot", "selfplay.snapshot_every=5"],
}
DEFAULT_ARMS = ["self-play", "references only", "frozen proposer", "curated"]
BASELINE = "references only"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="pretrained base for sql and code")
    parser.add_argument("--search-base", help="pretrained base for search (its recipe's mini)")
    parser.add_argument("--domains", nargs="+", default=["sql", "code"], choices=list(DOMAINS))
    parser.add_argument("--arms", nargs="+", default=DEFAULT_ARMS, choices=list(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sft-episodes", type=int, default=2000, help="per role")
    parser.add_argument("--sft-epochs", type=int, default=4)
    parser.add_argument(
        "--sft",
        nargs="*",
        default=[],
        metavar="DOMAIN=DIR",
        help="an SFT'd model to start a domain from (no SFT run for it)",
    )
    args = parser.parse_args()
    arms = [a for a in ARMS if a in args.arms]
    out = Path(tempfile.mkdtemp(prefix="toolgym-selfplay-"))
    given = dict(item.split("=", 1) for item in args.sft)
    for name in args.domains:
        domain = DOMAINS[name]
        sft = Path(given[name]) if name in given else warm(domain, name, out, args)
        recipe = ROOT / "configs" / f"selfplay_{name}.yaml"
        held_out = HeldOut(baseline=BASELINE if BASELINE in arms else arms[0])
        for seed in range(args.seeds):
            for k, arm in enumerate(arms):
                config = load_config(
                    TrainConfig, recipe,
                    [f"model={sft}", f"run_dir={out / f'{name}-{arm}-{seed}'.replace(' ', '-')}",
                     f"steps={args.steps}", f"seed={seed}", "tensorboard=false",
                     f"eval.every_steps={args.steps}", f"eval.at_start={k == 0}", *ARMS[arm]],
                )  # fmt: skip
                held_out.train(arm, config)
                start, end = held_out.start[-1], held_out.finals[arm][-1]
                print(f"{name} seed {seed} {arm:15}: held-out success "
                      f"{start['eval/success']:.1%} -> {end['eval/success']:.1%}", flush=True)  # fmt: skip
        print(f"{name}:\n{held_out.report()}", flush=True)


def warm(domain: Domain, name: str, out: Path, args: argparse.Namespace) -> Path:
    """The domain's warm start on both roles, made under `out`."""
    if domain.base == "tiny":
        base = tiny_model(None)
    else:
        chosen = args.search_base if domain.base == "search" and args.search_base else args.base
        if chosen is None:
            raise SystemExit(f"--base is needed for the {name} domain (a pretrained base)")
        base = Path(chosen)
    sft = out / f"{name}-sft"
    plan = WarmStart(
        domain.solver, domain.env_args, domain.episodes or args.sft_episodes,
        SFTConfig(epochs=domain.epochs or args.sft_epochs, lr=domain.lr,
                  batch_size=domain.batch_size),
        tool_schemas=False, with_envs=(domain.proposer,),
    )  # fmt: skip
    warm_start(base, sft, plan)
    return sft


if __name__ == "__main__":
    main()
