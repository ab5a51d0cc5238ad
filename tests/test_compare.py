"""`toolgym compare`: the paired difference between two evaluations, item by item."""

from __future__ import annotations

import math
import statistics

from toolgym.agents.trajectory import Step, Trajectory, write_jsonl
from toolgym.intervals import t95


def episode(item: int, success: bool, env_id: str = "toolgym/Maze-v0", masked: bool = False):
    """One scored episode whose opening message names `item` (what the pairing reads)."""
    step = Step(0, 1, [0.0], "move", [], float(success), None, None)
    return Trajectory(
        id=f"{item}-{success}", env_id=env_id, messages=[{"role": "user", "content": f"maze {item}"}],
        steps=[step], infra_error="sandbox died" if masked else None,
    )  # fmt: skip


def test_the_difference_is_paired_by_item_with_a_t_interval(cli, tmp_path):
    """Twelve items: before solves items 0-2, after solves 0-8, and item 9 twice (once each);
    after also played two items before never did, and before played one masked episode."""
    before = [episode(i, i < 3) for i in range(12)] + [episode(40, True, masked=True)]
    after = [episode(i, i < 9) for i in range(12)] + [episode(9, True), episode(50, True)]
    after += [episode(51, True)]
    write_jsonl(before, tmp_path / "before.jsonl")
    write_jsonl(after, tmp_path / "after.jsonl")
    done = cli("compare", str(tmp_path / "before.jsonl"), str(tmp_path / "after.jsonl"))
    assert done.returncode == 0, done.stderr
    differences = [0.0] * 3 + [1.0] * 6 + [0.5] + [0.0] * 2  # item 9: 1 of 2 after
    mean = statistics.fmean(differences)
    half = t95(11) * statistics.stdev(differences) / math.sqrt(12)
    assert "12 items played by both" in done.stdout
    assert f"after - before: {100 * mean:+.1f} points" in done.stdout
    assert f"95% interval {100 * (mean - half):+.1f} to {100 * (mean + half):+.1f}" in done.stdout
    assert "excludes 0: after is better" in done.stdout
    assert "25.0%" in done.stdout and "79.2%" in done.stdout  # 3/12 and 9.5/12
    assert "left out: 0 item(s) only before, 2 only after" in done.stdout


def test_one_policy_against_itself_greedy_differs_by_nothing(cli, tool_calling_model_dir, tmp_path):
    """Both files from `toolgym eval` itself: greedy twice on the same held-out mazes."""
    files = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.jsonl"
        done = cli("eval", "toolgym/Maze-v0", "--model", str(tool_calling_model_dir), "-n", "6",
                   "--max-tokens", "24", "--out", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr
        files.append(str(out))
    done = cli("compare", *files)
    assert done.returncode == 0, done.stderr
    assert "after - before: +0.0 points, 95% interval +0.0 to +0.0" in done.stdout
    assert "do not tell the two apart" in done.stdout


def test_files_that_cannot_be_paired_are_one_line_each(cli, tmp_path):
    maze = write_jsonl([episode(i, True) for i in range(4)], tmp_path / "maze.jsonl")
    sql = write_jsonl(
        [episode(i, True, "toolgym/SQL-v0") for i in range(4)], tmp_path / "sql.jsonl"
    )
    masked = write_jsonl([episode(1, True, masked=True)], tmp_path / "masked.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "garbage.jsonl").write_text('{"id": 1}\nnot json\n')
    cases = [
        ((maze, sql), "share 0 item(s) (only in"),
        ((maze, tmp_path / "missing.jsonl"), "is not a file"),
        ((maze, tmp_path), "is not a file"),
        ((masked, maze), "none was scored"),
        ((tmp_path / "empty.jsonl", maze), "holds 0 trajectories"),
        ((maze, tmp_path / "garbage.jsonl"), "garbage.jsonl:1: not a trajectory"),
    ]
    for (before, after), expected in cases:
        done = cli("compare", str(before), str(after))
        assert done.returncode == 2, (expected, done.stdout, done.stderr)
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
