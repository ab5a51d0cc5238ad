"""The guide's "register your own environment" example (docs/your-env.md) works exactly as
written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

TOOLGYM = Path(sys.executable).parent / "toolgym"  # the installed console script


def example() -> str:
    page = (ROOT / "docs" / "your-env.md").read_text()
    match = re.search(
        r"<!-- snippet: tested-by tests/test_readme.py::\w+ -->\n```python\n(.*?)```", page, re.S
    )
    assert match, "docs/your-env.md lost its register example"
    return match.group(1)


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(TOOLGYM), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_register_example_is_about_thirty_lines():
    code = [line for line in example().splitlines() if line.strip()]
    assert len(code) <= 32


def test_register_example_checks_and_plays_as_written(tmp_path):
    (tmp_path / "my_envs.py").write_text(example())
    checked = run("check", "my_envs:my/Guess-v0", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All checks passed." in checked.stdout
    guesses = "\n".join(f"guess {n}" for n in range(1, 11)) + "\n"
    played = run("play", "my_envs:my/Guess-v0", "--seed", "4", cwd=tmp_path, stdin=guesses)
    assert played.returncode == 0, played.stderr
    assert (
        "correct" in played.stdout
        and "Episode over (terminated)" in played.stdout
        and "return 1." in played.stdout
    )


def test_register_example_fine_tunes_on_its_own_solver(tmp_path, tiny_model_dir):
    (tmp_path / "my_envs.py").write_text(example())
    tuned = run("sft", "my_envs:my/Guess-v0", "--model", str(tiny_model_dir), "--out",
                str(tmp_path / "sft"), "--episodes", "8", "--epochs", "1", cwd=tmp_path)  # fmt: skip
    assert tuned.returncode == 0, tuned.stdout[-2000:] + tuned.stderr[-2000:]
    assert "8 demonstrations of my_envs:my/Guess-v0 (8 solved)" in tuned.stdout
