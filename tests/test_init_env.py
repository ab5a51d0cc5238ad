"""`toolgym init-env` writes a package that installs, is listed, passes `toolgym check` and
its own test, with no edits."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import run_cli


def test_a_new_env_package_installs_and_passes_as_written(tmp_path):
    made = run_cli("init-env", "word_games", "--out", str(tmp_path / "word_games"))
    assert made.returncode == 0, made.stderr
    assert "pip install -e . && toolgym check word_games/WordGames-v0" in made.stdout
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(tmp_path / "word_games")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {"PYTHONPATH": str(site)}
    listed = run_cli("list", "--filter", "word_games", env=env)
    assert listed.stdout.split("\t")[0] == "word_games/WordGames-v0", listed.stdout
    checked = run_cli("check", "word_games/WordGames-v0", env=env)
    assert checked.returncode == 0 and "All checks passed." in checked.stdout, checked.stdout
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "word_games", capture_output=True, text=True, timeout=300,
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
