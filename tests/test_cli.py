"""The CLI as a user runs it: a real `toolgym` process with real stdin and stdout."""

from __future__ import annotations

import os
import subprocess
import sys

import toolgym
from conftest import FIXTURES


def test_version_and_list(cli):
    assert cli("--version").stdout.strip() == f"toolgym {toolgym.__version__}"
    listed = cli("list")
    assert listed.returncode == 0
    assert "toolgym/Maze-v0" in listed.stdout and "toolgym/Arithmetic-v0" in listed.stdout


def test_play_a_maze_by_typing_tool_calls(cli):
    env = toolgym.make("toolgym/Maze-v0")
    env.reset(seed=3)
    moves = [
        f"{c.name} {' '.join(str(v) for v in c.arguments.values())}".strip() for c in env.solution()
    ]
    typo = '<tool_call>{"name": "mvoe", "arguments": {"direction": "north"}}</tool_call>'
    typed = "\n".join(["move up", typo, ":solve", *moves]) + "\n"
    result = cli("play", "toolgym/Maze-v0", "--seed", "3", stdin=typed)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Tools" in out and "open_door" in out and "Map:" in out  # schemas and opening shown
    assert 'expected one of "north", "south", "east", "west", got "up"' in out
    assert "unknown tool 'mvoe'. Did you mean: move?" in out
    assert "solver: <tool_call>" in out
    assert "You reached the goal!" in out
    assert f"Episode over (terminated) after {len(moves) + 2} turn(s), return 1." in out


def test_play_accepts_raw_text_and_ends_cleanly_on_eof(cli):
    raw = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>\n'
    result = cli("play", "toolgym/Arithmetic-v0", stdin=raw)
    assert result.returncode == 0
    assert "42" in result.stdout and "input ended; episode abandoned." in result.stdout
    hint = next(line for line in result.stdout.splitlines() if "Type a tool call" in line)
    assert "`calculator VALUE`, `calculator expression=VALUE`" in hint and "move" not in hint


def test_unknown_env_is_one_clear_line(cli):
    result = cli("play", "toolgym/Maz-v0")
    assert result.returncode != 0
    assert "env 'toolgym/Maz-v0' is not registered. Did you mean: toolgym/Maze-v0?" in result.stderr
    assert "Traceback" not in result.stderr


def test_sft_refuses_zero_epochs_episodes_or_batch_before_it_loads_anything(cli):
    """Zero passes would save the start model under the name of a fine-tuned one."""
    start = ["sft", "toolgym/Maze-v0", "--model", "/no/such/model", "--out", "/tmp/never"]
    for option in ("--epochs", "--episodes", "--batch-size"):
        result = cli(*start, option, "0")
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"Invalid value for '{option}'" in result.stdout + result.stderr


def test_play_shorthand_reads_each_tool_s_own_schema():
    """`tool words...` is read by the tool's schema: a text parameter keeps the rest of the
    line and its text as written, a number parameter takes a number."""
    from toolgym.cli.play import parse_shorthand

    def schemas(env_id: str, **kwargs) -> list[dict]:
        env = toolgym.make(env_id, **kwargs)
        try:
            return env.unwrapped.tool_schemas()
        finally:
            env.close()

    search = schemas("toolgym/Search-v0", hops=1)
    assert parse_shorthand("search capital of france", search).arguments == {
        "query": "capital of france"
    }
    arithmetic = schemas("toolgym/Arithmetic-v0")
    assert parse_shorthand("answer 5.08", arithmetic).arguments == {"value": 5.08}
    assert parse_shorthand("calculator 5.08", arithmetic).arguments == {"expression": "5.08"}
    assert parse_shorthand("calculator 2 * 3", arithmetic).arguments == {"expression": "2 * 3"}
    sql = schemas("toolgym/SQL-v0")
    assert parse_shorthand("run_sql SELECT name FROM t", sql).arguments == {
        "query": "SELECT name FROM t"
    }
    assert parse_shorthand("no_such_tool x", sql) is None


def test_a_users_file_named_like_a_package_shadows_nothing(tmp_path):
    """A click.py or openai.py in the folder the command runs from is not imported in place
    of the package; a module of the user's there still is."""
    for name in ("click", "openai", "typer"):
        (tmp_path / f"{name}.py").write_text("raise ImportError('the user file was imported')\n")
    (tmp_path / "my_envs.py").write_text(
        "import toolgym\ntoolgym.register('mine/Coin-v0', 'fixture_envs:CoinEnv')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
    listed = subprocess.run([sys.executable, "-m", "toolgym", "list"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    checked = subprocess.run(
        [sys.executable, "-m", "toolgym", "check", "my_envs:mine/Coin-v0"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]


def test_torch_threads_are_the_processs_share_unless_the_user_set_them(monkeypatch):
    from toolgym.cores import host_share, share_compute_threads

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert share_compute_threads() == host_share() >= 1
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"]
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert share_compute_threads() == 7
