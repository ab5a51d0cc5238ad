"""The README's three "start here" paths, run as written in a fresh virtual environment:
your own env, training on a shipped domain, and a search engine served real and simulated.
Each block runs in bash from an empty folder (tests/blocks.py: servers started with `&` are
waited for, then stopped at the end)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from blocks import run_block, user_env
from test_packaging import sh, venv_seeing_our_dependencies

from conftest import ROOT

pytestmark = pytest.mark.slow


def start_here_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Start here", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with toolgym installed into it (editable, from this tree), its
    dependencies seen from the test's interpreter, and `pip` installing into it."""
    root = tmp_path_factory.mktemp("readme-venv")
    python = venv_seeing_our_dependencies(root / "venv")
    pip = [sys.executable, "-m", "pip", "--python", python]
    sh(*pip, "install", "-q", "--no-deps", "--no-build-isolation", "-e", ROOT)
    shim = root / "venv" / "bin" / "pip"
    shim.write_text(f'#!/bin/sh\nexec {" ".join(map(str, pip))} "$@"\n')
    shim.chmod(0o755)
    return root / "venv"


def run_path(venv: Path, block: str, cwd: Path, stdin: str = "", then: str = "") -> str:
    return run_block(block, cwd, user_env(venv / "bin"), stdin=stdin, then=then)


def test_the_readme_has_three_paths():
    assert len(start_here_blocks()) == 3


def test_your_own_environment(venv, tmp_path):
    out = run_path(venv, start_here_blocks()[0], tmp_path, stdin=":quit\n")
    assert "All checks passed." in out and "Find the word under the card" in out


def test_train_on_a_shipped_domain(venv, tmp_path):
    out = run_path(venv, start_here_blocks()[1], tmp_path)
    assert re.search(r"^step 2/2  success", out, re.M)
    assert "evaluating toolgym/SQL-v0" in out and "SQL-v0:train:" in out
    assert (tmp_path / "runs" / "sql" / "policy" / "config.json").is_file()


def test_serve_a_search_engine(venv, tmp_path):
    readme = (ROOT / "README.md").read_text()
    call = re.search(r"point an env at either: `(.*?)`", readme, re.S).group(1).replace("\n", " ")
    script = (
        f"python - <<'PY'\nimport toolgym\nenv = {call}\nobs, _ = env.reset(seed=0)\n"
        "obs, *_ = env.step(env.parser.render([toolgym.ToolCall('search', {'query': 'born'})]))\n"
        "print('FOUND', obs[0]['content'][:40])\nPY\n"
    )
    out = run_path(venv, start_here_blocks()[2], tmp_path, then=script)
    assert "FOUND Doc 1 [id per-" in out  # the env searched through the served index
