"""`toolgym init-env` writes a package that installs, is listed, passes `toolgym check` and
its own test, with no edits."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli


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


def test_the_train_your_env_page_at_a_small_scale(tmp_path):
    """docs/train-your-env.md's commands, in order, each at the smallest size that runs it:
    a base pretrained for a few steps, a short warm start, one training step, an evaluation
    of the policy as trained, and one of its episodes shown."""
    assert run_cli("init-env", "word_games", "--out", str(tmp_path / "word_games")).returncode == 0
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(tmp_path / "word_games")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {"PYTHONPATH": str(site)}
    page = (ROOT / "docs" / "train-your-env.md").read_text()
    sft = re.search(r"^toolgym sft .*$", page, re.M)[0].split()
    base, out = tmp_path / "base", tmp_path / "sft"
    steps = [
        ["model", "pretrain", "--out", str(base), "--size", "tiny", "--env",
         "word_games/WordGames-v0", "--steps", "4", "--copy-warmup-steps", "0", "--seq-len", "128",
         "--probes", "0"],
        [*sft[1:sft.index("--model")], "--model", str(base), "--out", str(out),
         *[a for a in sft[sft.index("--out") + 2 :] if a not in ("--episodes", "--epochs")
           and not a.isdigit()], "--episodes", "8", "--epochs", "1"],
        ["train", "--config", str(tmp_path / "word_games" / "configs" / "train.yaml"),
         f"model={out}", f"run_dir={tmp_path / 'rl'}", "steps=1", "rollout.tasks_per_step=2",
         "optim.micro_batch_size=8", "optim.minibatches=1", "eval.episodes=2"],
        ["eval", "word_games/WordGames-v0", "--model", str(tmp_path / "rl" / "policy"), "-n", "2"],
        ["rollouts", "show", str(tmp_path / "rl")],
    ]  # fmt: skip
    for args in steps:
        done = run_cli(*args, env=env, timeout=600)
        assert done.returncode == 0, (args, done.stdout[-1500:], done.stderr[-1500:])
    assert "Table " in done.stdout and "peek" in done.stdout  # an episode of the card game


def test_bad_names_and_occupied_folders_are_refused(tmp_path):
    bad = run_cli("init-env", "Word-Games")
    assert bad.returncode == 2 and "lower-case letters, digits and underscores" in bad.stderr
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    taken = run_cli("init-env", "games", "--out", str(tmp_path / "taken"))
    assert taken.returncode == 2 and "is not empty" in taken.stderr
