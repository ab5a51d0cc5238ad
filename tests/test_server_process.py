"""Local servers that toolgym starts for an env (OpenEnv-v0's demo server, a verifiers
toolset's) die with the process that started them, even when it is killed with SIGKILL:
none is left behind as an orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

PARENT = textwrap.dedent(
    """
    import asyncio, sys
    from toolgym.envs.server_process import ServerProcess, process_wide

    async def main():
        server = await process_wide("probe", lambda: ServerProcess(
            "probe", [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"], "/"))
        print(server._process.pid, flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not yet reaped
        return stat.read().split(") ")[1][0] != "Z"


def test_a_local_server_dies_with_a_parent_killed_by_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        server = int(parent.stdout.readline())
        assert alive(server)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(server), "the server outlived its parent"
    finally:
        parent.kill()


FORKED = textwrap.dedent(
    """
    import asyncio, os, sys, urllib.request
    from toolgym.envs.server_process import ServerProcess, process_wide

    def make():
        return ServerProcess(
            "probe", [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"], "/")

    async def serving(who):
        server = await process_wide("probe", make)
        urllib.request.urlopen(server.url, timeout=5).read()
        print(who, server.port, server._process.pid, flush=True)

    asyncio.run(serving("parent"))
    child = os.fork()
    if child == 0:
        asyncio.run(serving("child"))
        sys.exit(0)  # an ordinary exit: its atexit hooks run
    os.waitpid(child, 0)
    asyncio.run(serving("parent"))
    """
)


def test_a_forked_child_starts_its_own_server_and_leaves_its_parents_running():
    """The child's copy of the parent's server is not the child's: restarted on the parent's
    port it never bound (the parent's server answered its probe), and stopped at the child's
    exit it would have been the parent's to lose."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    (parent, port, pid), (child, child_port, child_pid), (again, port_after, pid_after) = lines
    assert (parent, child, again) == ("parent", "child", "parent")
    assert child_port != port and child_pid != pid  # a server of its own, on a port of its own
    assert (port_after, pid_after) == (port, pid)  # the parent's, untouched by the child's exit
