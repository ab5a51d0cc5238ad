"""The suite's warm CLI runs (tests/warm_cli.py) behave as plain `python -m toolgym` runs: the
same output and exit code, stdin and a user's import path reach the command, a run past its
time is killed, and the shell's `toolgym` passes on its stdio and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import FIXTURES, ROOT, WARM, free_port


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(FIXTURES), **extra}


def plain(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolgym", *args], input=stdin, text=True,
                          capture_output=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [["list", "--filter", "Maze"], ["check", "fixture_envs:fixture/UnhashableState-v0"],
     ["--log-level", "LOUD", "list"], ["eval", "toolgym/Maze-v0", "--model", "/no/such/model"]],
    ids=["list", "failing check", "bad option", "missing model"],
)  # fmt: skip
def test_a_warm_run_prints_and_exits_as_a_plain_one(args):
    env = environment()
    assert WARM.usable(env)
    warm = WARM.run(args, env, ROOT, None, 120)
    cold = plain(args, env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        cold.returncode,
        cold.stdout,
        cold.stderr,
    )


def test_stdin_and_a_users_import_path_reach_the_command(tmp_path):
    (tmp_path / "my_envs.py").write_text(
        "import toolgym\ntoolgym.register('mine/Coin-v0', 'fixture_envs:CoinEnv')\n"
    )
    env = environment(PYTHONPATH=f"{tmp_path}:{FIXTURES}")
    args = ["play", "my_envs:mine/Coin-v0"]
    warm = WARM.run(args, env, ROOT, ":help\n:quit\n", 120)
    cold = plain(args, env, ":help\n:quit\n")
    assert warm.returncode == cold.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout and warm.stdout.count("action> ") == 2  # :help, :quit


def test_a_variable_the_libraries_read_at_import_starts_a_plain_process():
    assert not WARM.usable(environment(OMP_NUM_THREADS="7"))
    assert WARM.usable(environment(TOOLGYM_LOG="ERROR"))


def test_a_warm_run_past_its_time_is_killed():
    port = free_port()
    health = f"http://127.0.0.1:{port}/health"
    answered = []
    over = threading.Event()

    def watch() -> None:  # the server answers at some point while the run lasts
        while not answered and not over.is_set():
            answered.append(answers(health)) if answers(health) else time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            WARM.run(["serve", "env", "toolgym/Arithmetic-v0", "--port", str(port)],
                     environment(), ROOT, None, 20)  # fmt: skip
    finally:
        over.set()
        watcher.join()
    assert answered and not answers(health)  # it served, then it was killed


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_shells_toolgym_passes_on_its_stdio_and_exit_code(tmp_path):
    warm_bin = WARM.bin_dir()
    assert warm_bin is not None and (warm_bin / "toolgym").is_file()
    env = environment(PATH=f"{warm_bin}:{os.environ['PATH']}")
    script = "toolgym list --filter Maze | head -n 1; toolgym --log-level LOUD list; echo $?"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.stdout.splitlines() == [plain(["list", "--filter", "Maze"], env).stdout
                                        .splitlines()[0], "2"]  # fmt: skip
    assert "log level 'LOUD' is not one of DEBUG" in done.stderr
