"""Warm pools and sessions on real bubblewrap: results, limits, recycling, cancellation, and
backends that fail closed."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from toolgym.errors import ConfigError
from toolgym.sandbox import Limits, SandboxError, SandboxPool, Status, make_backend, run
from toolgym.sandbox.backends.bubblewrap import BubblewrapBackend
from toolgym.sandbox.backends.users import BLOCK, FIRST, USERS, SandboxUsers

LIMITS = Limits(timeout_s=5, memory_mb=256, output_bytes=2000, fetch_bytes=1000)


@pytest.fixture(scope="module")
def pool(loop_thread):
    made = SandboxPool("bubblewrap", size=2, max_calls=5, limits=LIMITS, health_interval_s=0)
    loop_thread.call(made.start())
    made.call = lambda code, **kw: loop_thread.call(made.run(code, **kw))
    yield made
    loop_thread.call(made.aclose())


def test_results_say_what_happened(pool):
    ok = pool.call("import sys; print('out'); print('err', file=sys.stderr)")
    assert (ok.status, ok.exit_code, ok.stdout, ok.stderr) == (Status.OK, 0, "out\n", "err\n")
    failed = pool.call("x = 1\ny = x / 0")
    assert failed.status is Status.ERROR and failed.exit_code == 1
    # the traceback shows the line that failed, as python would, and none of the sandbox
    assert 'File "main.py", line 2' in failed.stderr and "y = x / 0" in failed.stderr
    assert "ZeroDivisionError" in failed.stderr and "guest" not in failed.stderr
    assert pool.call("import sys; sys.exit(4)").exit_code == 4
    assert pool.call("kill -TERM $$", language="bash").signal == 15
    assert pool.call("print(input() + input())", stdin="a\nb\n").stdout == "ab\n"
    with pytest.raises(ConfigError, match="python, bash"):
        pool.call("1", language="cobol")


def test_output_is_capped_with_a_marker(pool):
    result = pool.call("print('y' * 5000)")
    assert result.status is Status.OUTPUT_LIMIT
    assert result.stdout.startswith("y" * 2000) and "output cut at 2000 bytes" in result.stdout
    assert len(result.observation(limit=300)) < 400


def test_files_go_in_and_come_back(pool):
    result = pool.call(
        "import os\nopen('sub/b.bin', 'wb').write(open('a.txt', 'rb').read()[::-1])\n"
        "open('big', 'w').write('z' * 5000)\nos.symlink('/etc/passwd', 'link')",
        files={"a.txt": b"abc", "sub/keep.txt": "k"},
        fetch_files=["sub/b.bin", "big", "link", "nothing"],
    )
    assert result.status is Status.OK, result
    assert result.files == {"sub/b.bin": b"cba", "big": None, "link": None, "nothing": None}
    for name in ("../escape", "/etc/passwd", "a//b", ""):
        with pytest.raises(ConfigError, match="inside the work dir"):
            pool.call("1", files={name: "x"})
    with pytest.raises(ConfigError, match="inside the work dir"):
        pool.call("1", fetch_files=["../../etc/shadow"])


def test_calls_do_not_see_each_other(pool):
    pool.call("import os; open('/tmp/t', 'w'); open('w', 'w'); os.environ['LEAK'] = '1'")
    after = pool.call("import os; print(os.listdir('/tmp'), os.listdir('.'), 'LEAK' in os.environ)")
    assert after.stdout == "[] [] False\n"


def test_limits_hold_and_a_call_may_only_lower_them(pool):
    assert pool.call("x = bytearray(400 * 2**20)").status is Status.MEMORY
    assert pool.call("x = bytearray(100 * 2**20)").status is Status.OK
    assert pool.call("x = bytearray(100 * 2**20)", memory_mb=64).status is Status.MEMORY
    assert pool.call("import time; time.sleep(0.5)", timeout_s=0.2).status is Status.TIMEOUT
    raised = pool.call("import time; time.sleep(7); print('late')", timeout_s=60)
    assert raised.status is Status.TIMEOUT and "late" not in raised.stdout  # capped at 5 s


def test_sandboxes_are_recycled_and_replaced(pool, loop_thread):
    before = dict(pool.counts)
    for _ in range(12):
        assert pool.call("print(1)").stdout == "1\n"
    assert pool.counts["started"] > before["started"]  # max_calls=5: fresh ones came in
    health = loop_thread.call(pool.health())
    assert health["ok"] and health["idle"] >= 1 and health["busy"] == 0


def test_cancelling_a_call_stops_its_process(pool, loop_thread):
    async def cancelled():
        task = asyncio.ensure_future(pool.run("import time; time.sleep(60)", timeout_s=5))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    retired = pool.counts["retired"]
    loop_thread.call(cancelled())
    assert pool.counts["retired"] == retired + 1  # its sandbox was stopped, not put back
    assert pool.call("print(2)").stdout == "2\n"


def test_sessions_keep_variables(pool, loop_thread):
    async def scenario():
        async with pool.session() as session:
            first = await session.run("x = 6\ndef f(y):\n    return x * y")
            shown = await session.run("f(7)")
            printed = await session.run("print(x)\nx + 1")
            interrupted = await session.run("while True: x += 0", timeout_s=0.5)
            kept = await session.run("x")
            ended = await session.run("import os; os._exit(0)")
            fresh = await session.run("'x' in globals()")
            await session.run("z = 1")
            await session.reset()
            reset = await session.run("'z' in globals()")
            with_files = await session.run(
                "open('o.txt', 'w').write(open('i.txt').read().upper())",
                files={"i.txt": "hi"}, fetch_files=["o.txt"],
            )  # fmt: skip
            return first, shown, printed, interrupted, kept, ended, fresh, reset, with_files

    first, shown, printed, interrupted, kept, ended, fresh, reset, with_files = loop_thread.call(
        scenario()
    )
    assert first.status is Status.OK and first.stdout == ""
    assert shown.stdout == "42\n"
    assert printed.stdout == "6\n7\n"
    assert interrupted.status is Status.TIMEOUT and "time limit" in interrupted.stderr
    assert kept.stdout == "6\n"  # an interrupted cell keeps the session
    assert ended.status is Status.ERROR and "restarted" in ended.stderr
    assert fresh.stdout == "False\n"
    assert reset.stdout == "False\n"
    assert with_files.files == {"o.txt": b"HI"}


def test_a_cell_that_ignores_its_interrupt_costs_the_session(pool, loop_thread):
    async def scenario():
        async with pool.session(timeout_s=1) as session:
            await session.run("kept = 1")
            stuck = await session.run(
                "import time\nwhile True:\n    try:\n        time.sleep(10)\n"
                "    except BaseException:\n        pass"
            )
            after = await session.run("'kept' in globals()")
            return stuck, after, session.restarts

    stuck, after, restarts = loop_thread.call(scenario(), timeout=60)
    assert stuck.status is Status.TIMEOUT and "restarted" in stuck.stderr
    assert after.stdout == "False\n" and restarts == 1


def test_one_off_run():
    result = asyncio.run(run("print(sum(range(5)))"))
    assert result.stdout == "10\n"


def test_backends_fail_closed():
    with pytest.raises(SandboxError, match="bwrap"):
        make_backend("bubblewrap", bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxError, match="interpreter"):
        make_backend("bubblewrap", python="/nonexistent/python3")
    with pytest.raises(SandboxError, match="build-image"):
        make_backend("docker", image="toolgym-no-such-image:0")
    with pytest.raises(ConfigError, match="Known"):
        make_backend("bwrap")
    with pytest.raises(SandboxError, match="bwrap"):
        SandboxPool("bubblewrap", backend_options={"bwrap": "/nonexistent/bwrap"})


@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "popen"])
def test_bubblewrap_started_by_root_runs_each_sandbox_as_a_user_of_its_own(setpriv):
    """Root's sandboxes run as host users no account has, one per live sandbox (so
    RLIMIT_NPROC counts each sandbox's processes alone), whether setpriv drops the ids or
    Popen does where setpriv is missing; a closed sandbox hands its user back."""
    backend = BubblewrapBackend()
    if not setpriv:
        backend.setpriv = None

    async def uids_of_our_bwraps() -> tuple[list[int], set[int]]:
        before = _bwraps()
        channels = [await backend.open("repl", Limits()) for _ in range(2)]
        try:
            uids = [uid for pid, uid in _bwraps().items() if pid not in before]
        finally:
            for channel in channels:
                await channel.close()
        return uids, set(USERS.live)

    uids, live_after = asyncio.run(uids_of_our_bwraps())
    if os.geteuid() == 0:
        assert len(set(uids)) == 2 and all(FIRST <= uid < 2**31 for uid in uids), uids
    else:
        assert set(uids) == {os.geteuid()}
    assert not live_after & set(uids)


def _bwraps() -> dict[str, int]:
    """The user of each bwrap process this process started, by pid."""
    return {s["Pid"]: int(s["Uid"].split()[0]) for s in _children() if s["Name"] == "bwrap"}


def _children() -> list[dict[str, str]]:
    """/proc/PID/status of this process's children, as fields."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            lines = (entry / "status").read_text().splitlines()
        except (OSError, NotADirectoryError):
            continue
        fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
        if fields.get("PPid", "").strip() == str(os.getpid()):
            found.append({k: v.strip() for k, v in fields.items()})
    return found


def test_a_backend_that_breaks_later_is_an_error_not_a_fallback():
    backend = BubblewrapBackend()
    backend.check()
    backend.python = "/nonexistent/python3"

    async def scenario():
        async with SandboxPool(backend, size=0, health_interval_s=0) as pool:
            await pool.run("print(1)")

    with pytest.raises(SandboxError):
        asyncio.run(scenario())


def test_local_backend_only_by_name_and_loudly(caplog):
    with caplog.at_level(logging.WARNING):
        backend = make_backend("local")
    assert "UNISOLATED" in caplog.text and backend.isolated is False

    async def scenario():
        async with SandboxPool(backend, size=1, health_interval_s=0) as pool:
            return await pool.run("import os; print(os.getcwd().endswith('/work'))")

    assert asyncio.run(scenario()).stdout == "True\n"


def test_sandbox_users_are_distinct_until_the_block_is_spent_and_come_back_once():
    users = SandboxUsers()
    held = [users.acquire() for _ in range(BLOCK)]
    assert len({u.uid for u in held}) == BLOCK
    shared = users.acquire()  # the block is spent: a live user takes a second sandbox
    assert shared.uid in {u.uid for u in held} and users.live[shared.uid] == 2
    shared.release()
    shared.release()  # a second clean-up path hands back nothing more
    assert users.live[shared.uid] == 1
    for user in held:
        user.release()
    assert users.live == {}
