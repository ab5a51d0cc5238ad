"""Self-play against the curated recipe, on each domain, over several seeds.

For each domain, one SFT warm start on both roles (`toolgym sft SOLVER --with-env PROPOSER`,
from `--base`). Then, per seed, two runs from it with the same steps and rollout settings:

- self-play: configs/selfplay_DOMAIN.yaml. It has no curated training tasks; the pool's
  references are solved only when too few proposals are valid.
- curated: the same config without `selfplay`, trained on the solver env's own training tasks.

Each run prints held-out solver success (the solver env's eval split, sampled: items
training never drew, by content) at the start and after the last step. Last come, per eval
set (the held-out split, then the recipe's transfer sets: SQL's values no training database
holds), the start's and each method's success over seeds with 95% intervals, and self-play's
difference from the curated recipe paired by seed.

    python bench/selfplay.py --base models/pt_tiny [--domains sql code] [--seeds 3]
        [--steps 20] [--sft-episodes 2000] [--sft-epochs 4] [--search-base models/search-mini]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import HeldOut

from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.sft import SFTConfig
from toolgym.training.warm_start import WarmStart, warm_start

ROOT = Path(__file__).resolve().parent.parent
SFT = {
    "sql": ("toolgym/SQL-v0", "toolgym/ProposeSQL-v0",
            {"style": "tags", "sample_rows": 0, "solver_slips": 0.5, "values": "wide",
             "templates": ["filter_count", "filter_list", "aggregate_state", "ordering"]}, 3e-3),
    "code": ("toolgym/CodeReason-v0", "toolgym/ProposeCode-v0", {}, 3e-3),
    "search": ("toolgym/Search-v0", "toolgym/ProposeSearch-v0",
               {"hops": 1, "topk": 1, "doc_chars": 150, "max_turns": 3}, 1e-3),
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="pretrained base for sql and code")
    parser.add_argument("--search-base", help="pretrained base for search (its recipe's mini)")
    parser.add_argument("--domains", nargs="+", default=["sql", "code"], choices=list(SFT))
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
    out = Path(tempfile.mkdtemp(prefix="toolgym-selfplay-"))
    for domain in args.domains:
        solver, proposer, env_args, lr = SFT[domain]
        base = Path(args.search_base if domain == "search" and args.search_base else args.base)
        given = dict(item.split("=", 1) for item in args.sft)
        sft = Path(given[domain]) if domain in given else out / f"{domain}-sft"
        if domain not in given:
            plan = WarmStart(solver, env_args, args.sft_episodes,
                             SFTConfig(epochs=args.sft_epochs, lr=lr, batch_size=16),
                             tool_schemas=False, with_envs=(proposer,))  # fmt: skip
            warm_start(base, sft, plan)
        recipe = ROOT / "configs" / f"selfplay_{domain}.yaml"
        held_out = HeldOut(baseline="curated")
        for seed in range(args.seeds):
            for name, extra in (("curated", ["selfplay=null"]), ("self-play", [])):
                config = load_config(
                    TrainConfig, recipe,
                    [f"model={sft}", f"run_dir={out / f'{domain}-{name}-{seed}'}",
                     f"steps={args.steps}", f"seed={seed}", "tensorboard=false",
                     f"eval.every_steps={args.steps}", f"eval.at_start={name == 'curated'}",
                     *extra],
                )  # fmt: skip
                held_out.train(name, config)
                start, end = held_out.start[-1], held_out.finals[name][-1]
                print(f"{domain} seed {seed} {name:9}: held-out success "
                      f"{start['eval/success']:.1%} -> {end['eval/success']:.1%}", flush=True)  # fmt: skip
        print(f"{domain}:\n{held_out.report()}", flush=True)


if __name__ == "__main__":
    main()
