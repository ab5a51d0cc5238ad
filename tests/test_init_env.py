"""`toolgym init-env` writes a package that installs, is listed, passes `toolgym check` and
its own test, with no edits."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import run_cli


@pytest.mark.parametrize(
    ("name", "mcp"), [("word_games", False), ("card_server", True)], ids=["tool", "mcp"]
)
def test_a_new_env_package_installs_and_passes_as_written(tmp_path, name, mcp):
    """With --mcp the package's peek tool is served by its own MCP server (the installed SDK's
    MCPServer over stdio), which the env reaches through MCPTools."""
    title = "".join(part.capitalize() for part in name.split("_"))
    made = run_cli("init-env", name, "--out", str(tmp_path / name), *(["--mcp"] if mcp else []))
    assert made.returncode == 0, made.stderr
    assert f"pip install -e . && toolgym check {name}/{title}-v0" in made.stdout
    assert (tmp_path / name / name / "server.py").is_file() == mcp
    assert (tmp_path / name / "configs" / "train.yaml").is_file()
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(tmp_path / name)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {"PYTHONPATH": str(site)}
    listed = run_cli("list", "--filter", name, env=env)
    assert listed.stdout.split("\t")[0] == f"{name}/{title}-v0", listed.stdout
    checked = run_cli("check", f"{name}/{title}-v0", env=env)
    assert checked.returncode == 0 and "All checks passed." in checked.stdout, checked.stdout
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / name, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    assert tested.returncode == 0 and "2 passed" in tested.stdout, tested.stdout[-2000:]


def test_bad_names_and_occupied_folders_are_refused(tmp_path):
    bad = run_cli("init-env", "Word-Games")
    assert bad.returncode == 2 and "lower-case letters, digits and underscores" in bad.stderr
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    taken = run_cli("init-env", "games", "--out", str(tmp_path / "taken"))
    assert taken.returncode == 2 and "is not empty" in taken.stderr
