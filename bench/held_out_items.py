"""How held out each shipped recipe's evaluation is: for every config under configs/, its env
as the recipe sets it up, the distinct items among its first 3,000 training draws, its eval
draws (as many as the recipe evaluates) and the share of those that training draws too. An
item is what the policy sees at reset (envs/tasks/held_out.py), so two seeds that open alike count
once. No baseline: the figure is the share itself, and 2% is what a held-out set may share.

An env that cannot be built here (a search recipe without its index, a Ray or GPU recipe)
is listed with the reason; one whose resets are slow stops after `--seconds` and says how
many draws it compared.

    python bench/held_out_items.py [--train 3000] [--seconds 120] [configs/maze_gigpo.yaml ...]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from toolgym.config import load_config
from toolgym.envs.registration import make
from toolgym.envs.tasks.held_out import shared_share, split_items
from toolgym.errors import one_line
from toolgym.training.config import TrainConfig

ROOT = Path(__file__).resolve().parent.parent


async def measure(config_path: Path, train_draws: int, seconds: float) -> str:
    config = load_config(TrainConfig, config_path, ["model=unused"])
    rows = []
    for ref in (section.ref for section in config.mixture):
        env = make(ref.env_id, **dict(ref.kwargs))
        until = asyncio.get_running_loop().time() + seconds
        try:
            train, held = await split_items(env.unwrapped, train_draws, config.eval.episodes, until)
        finally:
            await env.aclose()
        rows.append(
            f"{config_path.name:<24} {ref.env_id:<22} {len(train):>6} {len(set(train)):>8} "
            f"{len(held):>5} {len(set(held)):>8} {shared_share(held, train):>7.1%}"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", type=Path)
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    configs = args.configs or sorted((ROOT / "configs").glob("*.yaml"))
    print(f"{'config':<24} {'env':<22} {'train':>6} {'distinct':>8} {'eval':>5} "
          f"{'distinct':>8} {'shared':>7}")  # fmt: skip
    for path in configs:
        try:
            print(asyncio.run(measure(path, args.train, args.seconds)))
        except Exception as exc:  # a recipe that needs what this machine lacks
            print(f"{path.name:<24} not measured: {one_line(exc, 160)}")


if __name__ == "__main__":
    main()
