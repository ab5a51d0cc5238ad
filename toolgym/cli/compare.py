"""`toolgym compare BEFORE AFTER`: two policies' evaluations, paired by the items both played.

Two success rates with overlapping intervals do not say the policies are alike: most of a
rate's spread is which items were drawn. Played on the same items, each item's difficulty
cancels in the difference, so the paired interval is the one a claim of "trained beats
start" rests on. Items are what the policy saw at reset (`Trajectory.item`), so the pairing
holds whatever seeds drew them; an item played several times counts as its success rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolgym.cli.show import console
from toolgym.cli.tables import print_table
from toolgym.intervals import pair, paired_difference


def file_item_success(path: Path) -> dict[str, float]:
    """`item_success` of the trajectories JSONL at `path`, which must hold a scored one."""
    from toolgym.agents.collector import item_success
    from toolgym.agents.trajectory import read_jsonl
    from toolgym.errors import ConfigError

    if not path.is_file():
        raise ConfigError(f"{path} is not a file; give the trajectories JSONL `toolgym eval` wrote")
    trajectories = read_jsonl(path)
    success = item_success(trajectories)
    if not success:
        raise ConfigError(
            f"{path} holds {len(trajectories)} trajectories and none was scored "
            "(an empty file, or every episode masked by an infrastructure error)"
        )
    return success


def compare_command(before_path: Path, after_path: Path) -> int:
    from toolgym.errors import ConfigError

    paired = pair(file_item_success(before_path), file_item_success(after_path))
    n = len(paired.before)
    if n < 2:
        raise ConfigError(
            f"the two files share {n} item(s) (only in {before_path}: {paired.only_before}, "
            f"only in {after_path}: {paired.only_after}); evaluate both policies on the same "
            "env, settings and split (`toolgym eval ... --split eval -n N`)"
        )
    difference, low, high = paired_difference(paired.after, paired.before)
    table = Table(title=f"{n} items played by both")
    for column in ("policy", "file", "success on these items"):
        table.add_column(column)
    table.add_row("before", str(before_path), f"{sum(paired.before) / n:.1%}")
    table.add_row("after", str(after_path), f"{sum(paired.after) / n:.1%}")
    print_table(table, console)
    console.print(
        f"after - before: {100 * difference:+.1f} points, 95% interval "
        f"{100 * low:+.1f} to {100 * high:+.1f} (paired by item)"
    )
    if low > 0 or high < 0:
        console.print(f"the interval excludes 0: after is {'better' if low > 0 else 'worse'}")
    else:
        console.print("the interval holds 0: these items do not tell the two apart")
    if paired.only_before or paired.only_after:
        console.print(
            f"left out: {paired.only_before} item(s) only before, {paired.only_after} only after"
        )
    return 0


def compare(
    before: Annotated[
        Path, typer.Argument(help="Trajectories JSONL of one policy (toolgym eval --out).")
    ],
    after: Annotated[
        Path, typer.Argument(help="Trajectories JSONL of the other, on the same items.")
    ],
) -> None:
    """Paired difference in success between two evaluations, on the items both played."""

    raise typer.Exit(compare_command(before_path=before, after_path=after))
