"""Local servers that toolgym starts for an env (OpenEnv-v0's demo server, a verifiers
toolset's) are shared resources: one per key in their owner's set, stopped when it closes,
started again on their port when they die; they die with the process that started them,
even when it is killed with SIGKILL (none is left behind as an orphan), and a forked child
starts its own rather than using or stopping its parent's."""

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
    from toolgym.envs.resources import Resources
    from toolgym.envs.server_process import ServerProcess, shared_server

    async def main():
        server = await shared_server(Resources().get, "probe", lambda: ServerProcess(
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
    from toolgym.envs.resources import Resources
    from toolgym.envs.server_process import ServerProcess, shared_server

    resources = Resources()

    def make():
        return ServerProcess(
            "probe", [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"], "/")

    async def serving(who):
        server = await shared_server(resources.get, "probe", make)
        urllib.request.urlopen(server.url, timeout=5).read()
        print(who, server.port, server._process.pid, flush=True)

    asyncio.run(serving("parent"))
    child = os.fork()
    if child == 0:
        asyncio.run(serving("child"))
        asyncio.run(resources.aclose())  # the child's close stops the child's server only
        os._exit(0)
    os.waitpid(child, 0)
    asyncio.run(serving("parent"))
    asyncio.run(resources.aclose())
    """
)


def test_a_forked_child_starts_its_own_server_and_leaves_its_parents_running():
    """The child's copy of the parent's resources is not the child's: the server restarted on
    the parent's port would never bind (the parent's server answering its probe), and stopped
    by the child's close it would have been the parent's to lose."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    (parent, port, pid), (child, child_port, child_pid), (again, port_after, pid_after) = lines
    assert (parent, child, again) == ("parent", "child", "parent")
    assert child_port != port and child_pid != pid  # a server of its own, on a port of its own
    assert (port_after, pid_after) == (port, pid)  # the parent's, untouched by the child's exit


def test_a_server_is_one_per_key_restarted_on_its_port_and_stopped_with_its_owner():
    import asyncio
    import urllib.request

    from toolgym.envs.resources import Resources
    from toolgym.envs.server_process import ServerProcess, shared_server

    def make() -> ServerProcess:
        return ServerProcess(
            "probe", [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"], "/"
        )

    async def main() -> None:
        resources = Resources()
        first, second = await asyncio.gather(
            shared_server(resources.get, "probe", make), shared_server(resources.get, "probe", make)
        )
        assert first is second and resources.opened == 1  # concurrent callers, one start
        pid, port = first._process.pid, first.port
        os.killpg(pid, signal.SIGKILL)
        first._process.wait()
        again = await shared_server(resources.get, "probe", make)
        assert again is first and again.port == port and again._process.pid != pid
        urllib.request.urlopen(again.url, timeout=5).read()
        restarted = again._process.pid
        await resources.aclose()
        deadline = time.monotonic() + 10
        while alive(restarted) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not alive(restarted), "closing its owner left the server running"

    asyncio.run(main())
