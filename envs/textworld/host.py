"""The host that game workers are forked from: one process per trainer process, started on
the first game, with TextWorld imported once (most of a worker's start-up). Each connection
to its Unix socket is served by a fresh fork (a worker: worker.py), which first says its pid
so that the env can kill it. The host exits when its parent closes its stdin (or dies)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1


def _serve_connection(connection: socket.socket) -> None:
    from toolgym.envs.textworld.worker import serve

    with (
        connection.makefile("r", encoding="utf-8") as requests,
        connection.makefile("w", encoding="utf-8") as answers,
    ):
        answers.write(json.dumps({"pid": os.getpid()}) + "\n")
        answers.flush()
        serve(requests, answers)


def _die_with(host: int) -> None:
    """A worker busy generating a game would outlive its host by minutes: have the kernel
    kill it when the host dies (Linux; elsewhere the worker ends at its next read)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != host:  # the host died before the request was made
        os._exit(0)


def main(address: str) -> None:
    # loaded once here, inherited by every worker
    import textworld.challenges  # noqa: F401

    import toolgym.envs.textworld.worker  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped as they exit
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(128)
    print("ready", flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # library chatter never reaches a pipe
    events = selectors.DefaultSelector()
    events.register(server, selectors.EVENT_READ)
    parent = sys.stdin.fileno()
    events.register(parent, selectors.EVENT_READ)
    while True:
        for key, _ in events.select():
            if key.fd == parent:
                if not os.read(parent, 1024):  # the parent is gone, maybe without cleaning up
                    with contextlib.suppress(OSError):  # (a forked child leaves by os._exit)
                        os.unlink(address)
                        os.rmdir(os.path.dirname(address))
                    return
                continue
            connection, _ = server.accept()
            host = os.getpid()
            if os.fork() == 0:
                server.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _die_with(host)
                try:
                    _serve_connection(connection)
                finally:
                    os._exit(0)
            connection.close()


if __name__ == "__main__":
    main(sys.argv[1])
