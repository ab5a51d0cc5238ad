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
