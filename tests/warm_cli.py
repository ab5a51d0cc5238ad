"""`toolgym ARGS` run in a process forked from one that has imported torch and transformers
already: a CLI run that loads a model spends 5 to 7 s of CPU importing them, and the suite
runs hundreds. Nothing of toolgym is imported before the fork, so each run imports toolgym,
registers the installed envs and reads its settings afresh, as `python -m toolgym` does, in
its own working directory, environment, arguments, stdio and sys.path.

`python warm_cli.py FOLDER` serves on FOLDER/socket; `WarmCli.run` asks it for one run, and
the `toolgym` in `WarmCli.bin_dir()` (for shell blocks) hands it its own stdio and passes on
the signals it gets. Libraries read some variables at import (`WARM_UNSAFE`), so a run that
sets one of them to another value than the test process holds starts a plain process
instead, as every run does with TOOLGYM_TESTS_PLAIN_CLI=1. (What the test process itself
sets later, as toolgym's log set-up does, is no reason: toolgym applies its own choices
through the libraries' calls when they were imported first.)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRELOAD = ("torch", "transformers", "transformers.models.qwen2.modeling_qwen2", "tokenizers",
           "numpy", "typer", "rich", "pydantic", "gymnasium", "jinja2", "yaml")  # fmt: skip
WARM_UNSAFE = ("OMP_", "MKL_", "TORCH", "HF_", "TRANSFORMERS", "CUDA", "PYTORCH", "TOKENIZERS")
"""Prefixes of the variables the preloaded libraries read at import."""
PLAIN = "TOOLGYM_TESTS_PLAIN_CLI"


def same_libraries(env: Mapping[str, str], tests: Mapping[str, str]) -> bool:
    """Whether `env` leaves every variable the preloaded libraries read as `tests` (the test
    process's environment) holds it."""
    keys = {k for k in (*env, *tests) if k.startswith(WARM_UNSAFE)}
    return all(env.get(k) == tests.get(k) for k in keys)


# ----- the server --------------------------------------------------------------------------
def serve(folder: Path) -> None:
    for name in PRELOAD:
        __import__(name)
    base_path = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(":")]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "socket"))
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            return  # the test process is gone (its end of our stdin closed)
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child(conn, base_path)
        conn.close()


def _child(conn: socket.socket, base_path: list[str]) -> None:
    code = 1
    try:
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(message)
        conn.sendall(f"{os.getpid()}\n".encode())
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(":") if p]
        sys.path[:] = [request["cwd"], *extra, *base_path]
        sys.argv = ["-m", *request["args"]]
        code = _run_toolgym()
    finally:
        try:
            conn.sendall(f"{code}\n".encode())
        finally:
            os._exit(code)


def _run_toolgym() -> int:
    import atexit
    import runpy
    import traceback

    code: Any = 0
    try:
        runpy.run_module("toolgym", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to say
            stream.flush()
    return int(code or 0)


# ----- clients ------------------------------------------------------------------------------
def _ask(folder: Path, args: list[str], env: Mapping[str, str], cwd: str, fds: list[int]):
    """Start the run; the connection (its exit code comes on it) and the run's pid."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(folder / "socket"))
    request = json.dumps({"args": args, "env": dict(env), "cwd": cwd}).encode()
    socket.send_fds(conn, [request], fds)
    reader = conn.makefile("r")
    return conn, reader, int(reader.readline())


def forward(folder: Path, args: list[str]) -> int:
    """Run `toolgym ARGS` warm with this process's stdio, cwd and environment (what the
    `toolgym` of `WarmCli.bin_dir()` does): its exit code, 128 + N if signal N ended it."""
    tests = json.loads((folder / "environ.json").read_text())
    if os.environ.get(PLAIN) or not same_libraries(os.environ, tests):
        os.execv(sys.executable, [sys.executable, "-m", "toolgym", *args])
    conn, reader, pid = _ask(folder, args, os.environ, os.getcwd(), [0, 1, 2])
    ended = [int(signal.SIGKILL)]

    def pass_on(number: int, _frame: object) -> None:
        ended[0] = number
        os.kill(pid, number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, pass_on)
    answer = reader.readline()
    conn.close()
    return int(answer) if answer.strip() else 128 + ended[0]


class WarmCli:
    """The test process's side: one server per test process, started at its first run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[str] | None = None
        self._folder = Path()

    def usable(self, env: Mapping[str, str]) -> bool:
        if os.environ.get(PLAIN):
            return False
        return self._start() and same_libraries(env, os.environ)

    def _start(self) -> bool:
        with self._lock:
            if self._server is not None:
                return self._server.poll() is None
            self._folder = Path(tempfile.mkdtemp(prefix="toolgym-warm-"))
            self._server = subprocess.Popen(
                [sys.executable, __file__, str(self._folder)],
                stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
            )  # fmt: skip
            ready = self._server.stdout.readline() if self._server.stdout else ""
            return ready.strip() == "ready"

    def bin_dir(self) -> Path | None:
        """A folder whose `toolgym` runs warm, to put first on a shell's PATH (None if the
        server cannot start or every run is to be plain)."""
        if os.environ.get(PLAIN) or not self._start():
            return None
        folder = self._folder / "bin"
        (self._folder / "environ.json").write_text(json.dumps(dict(os.environ)))
        if not folder.is_dir():
            folder.mkdir()
            shim = folder / "toolgym"
            shim.write_text(
                f"#!{sys.executable}\nimport sys\nfrom pathlib import Path\n"
                f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                f"from warm_cli import forward\n"
                f"sys.exit(forward(Path({str(self._folder)!r}), sys.argv[1:]))\n"
            )
            shim.chmod(0o755)
        return folder

    def run(
        self, args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "toolgym", *args]
        if not self._start():
            raise RuntimeError(
                "the warm CLI server did not start (TOOLGYM_TESTS_PLAIN_CLI=1 runs without it)"
            )
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
                tempfile.TemporaryFile() as err:  # fmt: skip
            given.write((stdin or "").encode())
            given.seek(0)
            conn, reader, pid = _ask(
                self._folder, args, env, str(cwd), [given.fileno(), out.fileno(), err.fileno()]
            )
            try:
                conn.settimeout(timeout)
                answer = reader.readline()
                returncode = int(answer) if answer.strip() else -signal.SIGKILL
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout) from None
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                raise
            finally:
                conn.close()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(
                command, returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"),
            )  # fmt: skip

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.kill()
            self._server.wait()
        if self._server is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
