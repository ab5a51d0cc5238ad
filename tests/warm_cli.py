"""`toolgym ARGS` run in a process forked from one that has imported torch and transformers
already: a CLI run that loads a model spends 5 to 7 s of CPU importing them, and the suite
runs hundreds. Nothing of toolgym is imported before the fork, so each run imports toolgym,
registers the installed envs and reads its settings afresh, as `python -m toolgym` does, in
its own working directory, environment, arguments, stdio and sys.path.

`python warm_cli.py SOCKET` serves; `WarmCli.run` asks it for one run. Libraries read at
import only what the worker's environment holds, so a run whose environment changes a
variable they read (`WARM_UNSAFE`) starts a plain process instead, as every run does with
TOOLGYM_TESTS_PLAIN_CLI=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

PRELOAD = ("torch", "transformers", "transformers.models.qwen2.modeling_qwen2", "tokenizers",
           "numpy", "typer", "rich", "pydantic", "gymnasium", "jinja2", "yaml")  # fmt: skip
WARM_UNSAFE = ("OMP_", "MKL_", "TORCH", "HF_", "TRANSFORMERS", "CUDA", "PYTORCH", "TOKENIZERS")
"""Prefixes of the variables the preloaded libraries read at import."""


def serve(path: str) -> None:
    for name in PRELOAD:
        __import__(name)
    base_path = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(":")]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    while True:
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


class WarmCli:
    """The client side: one server per test process, started at its first run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[str] | None = None
        self._socket = ""

    def usable(self, env: dict[str, str]) -> bool:
        if os.environ.get("TOOLGYM_TESTS_PLAIN_CLI"):  # every run a plain process
            return False
        changed = [k for k, v in env.items() if os.environ.get(k) != v]
        return not any(k.startswith(WARM_UNSAFE) for k in changed) and self._start()

    def _start(self) -> bool:
        with self._lock:
            if self._server is not None:
                return self._server.poll() is None
            folder = tempfile.mkdtemp(prefix="toolgym-warm-")
            self._socket = os.path.join(folder, "socket")
            self._server = subprocess.Popen(
                [sys.executable, __file__, self._socket],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            ready = self._server.stdout.readline() if self._server.stdout else ""
            return ready.strip() == "ready"

    def run(
        self, args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "toolgym", *args]
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
                tempfile.TemporaryFile() as err:  # fmt: skip
            given.write((stdin or "").encode())
            given.seek(0)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(self._socket)
            pid = 0
            try:
                request = json.dumps({"args": args, "env": env, "cwd": str(cwd)}).encode()
                socket.send_fds(conn, [request], [given.fileno(), out.fileno(), err.fileno()])
                conn.settimeout(timeout)
                reader = conn.makefile("r")
                pid = int(reader.readline())
                answer = reader.readline()
                returncode = int(answer) if answer.strip() else -signal.SIGKILL
            except TimeoutError:
                if pid:
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout) from None
            except BaseException:
                if pid:
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


if __name__ == "__main__":
    serve(sys.argv[1])
