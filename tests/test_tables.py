"""Every table toolgym prints stays whole at 80 columns and in a pipe: no cell cut ("tempe…",
"54.2…"). A table whose words fit is drawn with each column at least its longest word; one
whose words cannot fit is stacked, a block per row."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import types
from pathlib import Path

from rich.console import Console
from rich.table import Table

from conftest import ROOT
from toolgym.agents.collector import RolloutStats
from toolgym.cli import evaluate, quickstart, show
from toolgym.cli.tables import print_table


def printed(table: Table, width: int = 80) -> str:
    out = Console(width=width, file=io.StringIO(), highlight=False)
    print_table(table, out)
    return out.file.getvalue()


def cells(table: Table) -> list[str]:
    return [str(c.header) for c in table.columns] + [str(x) for c in table.columns for x in c.cells]


def assert_whole(table: Table, text: str) -> None:
    """No cell is cut: every word of every header and cell is printed whole."""
    assert "…" not in text, text
    words = {word for cell in cells(table) for word in cell.split()}
    missing = [w for w in words if w not in text]
    assert not missing, (missing, text)
    assert max(len(line) for line in text.splitlines()) <= 80


def quickstart_figures(change: bool) -> dict[float, dict[str, float]]:
    figures = {}
    for key in ("held-out/", "4x4/"):
        figures |= {f"{key}success": 0.604, f"{key}success_low": 0.542,
                    f"{key}success_high": 0.663, f"{key}items": 198, f"{key}plays": 3,
                    f"{key}valid_actions": 0.991, f"{key}turns": 3.21}  # fmt: skip
        if change:
            figures |= {f"{key}change": 0.152, f"{key}change_low": -0.081,
                        f"{key}change_high": 0.22}  # fmt: skip
    return {1.0: figures, 0.0: figures}


def test_the_quickstart_table_stays_a_table_with_every_word_whole():
    table = quickstart.results_table(quickstart_figures(False), quickstart_figures(True))
    text = printed(table)
    assert_whole(table, text)
    assert "┃ policy" in text  # still drawn as a table, not stacked


def test_a_table_too_wide_for_its_words_is_stacked_a_block_per_row():
    stats = RolloutStats(episodes=200, masked=3, success_rate=0.955, successes=191, items=200,
                         mean_reward=0.955, mean_turns=2.0, valid_action_rate=0.995,
                         tool_exception_rate=0.0, success_interval=(0.917, 0.976),
                         generated_tokens=9600, tokens_per_s=413.0, seconds=23.0)  # fmt: skip
    table = evaluate.results_table("toolgym/Arithmetic-v0 · hf · runs/base", stats)
    text = printed(table)
    assert_whole(table, text)
    assert re.search(r"^95% interval +91\.7% to 97\.6% *$", text, re.M)  # a line a cell
    wide = printed(evaluate.results_table("title", stats), width=200)
    assert "┃ episodes" in wide  # a wide terminal gets the table


def test_a_long_tool_description_wraps_whole(monkeypatch):
    schema = {"function": {"name": "search_the_catalogue", "description": "Find products " * 12,
                           "parameters": {"properties": {"query": {"type": "string"}},
                                          "required": ["query"]}}}  # fmt: skip
    out = Console(width=80, file=io.StringIO(), highlight=False)
    monkeypatch.setattr(show, "console", out)
    show.show_tools([schema, schema])
    text = out.file.getvalue()
    assert "…" not in text and text.count("search_the_catalogue") == 2, text
    assert text.count("Find products") == 24 and "query:" in text


def test_toolgym_eval_s_table_is_whole_in_a_pipe(tiny_model_dir, tmp_path):
    """A pipe has no terminal width: rich draws 80 columns, and nothing may be cut."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "toolgym", "eval", "toolgym/Arithmetic-v0", "--model",
         str(tiny_model_dir), "-n", "4", "--max-tokens", "8", "--out", str(tmp_path / "e.jsonl")],
        capture_output=True, text=True, env=env, cwd=Path(ROOT), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "…" not in done.stdout, done.stdout
    for said in ("episodes", "distinct items", "95% interval", "valid tool calls", "masked"):
        assert said in done.stdout, done.stdout


def test_toolgym_compare_and_the_models_probes_print_whole(monkeypatch, tmp_path):
    """A comparison names its two files (a long path is one word) and the probes table is
    narrow: at 80 columns neither cuts a cell."""
    from test_compare import episode

    from toolgym.agents.trajectory import write_jsonl
    from toolgym.cli import compare, models

    folder = tmp_path / ("evaluations-of-the-trained-policy-" * 2)
    folder.mkdir()
    for name, solved in (("before", 3), ("after", 9)):
        write_jsonl([episode(i, i < solved) for i in range(12)], folder / f"{name}.jsonl")
    out = Console(width=80, file=io.StringIO(), highlight=False)
    monkeypatch.setattr(compare, "console", out)
    assert compare.compare_command(folder / "before.jsonl", folder / "after.jsonl") == 0
    text = out.file.getvalue()
    # a path wider than the console folds over lines: every character is there, in order
    assert "…" not in text and str(folder / "before.jsonl") in "".join(text.split())
    assert "25.0%" in text and "75.0%" in text
    probes = Console(width=80, file=io.StringIO(), highlight=False)
    monkeypatch.setattr(models, "console", probes)
    result = types.SimpleNamespace(kind="copy", distance=64, accuracy=0.5, token_accuracy=0.75)
    models._print_probes([result])
    assert "…" not in probes.file.getvalue() and "tokens back" in probes.file.getvalue()
