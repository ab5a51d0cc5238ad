"""The sandbox's security suite, on bubblewrap and on Docker: each attack is contained, and
the pool answers a plain call correctly afterwards. Real bwrap, a real Docker engine and the
locally built image (the Makefile's `system-deps` installs and starts them)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import replace

import pytest

from conftest import ROOT
from toolgym.sandbox import Limits, SandboxPool, Status

BACKENDS = ["bubblewrap", "docker"]
LIMITS = Limits(timeout_s=3, memory_mb=256, processes=32, output_bytes=4096, work_mb=16)


@pytest.fixture(scope="module", params=BACKENDS)
def pool(request, loop_thread):
    made = SandboxPool(request.param, size=2, limits=LIMITS, health_interval_s=0)
    loop_thread.call(made.start())
    made.call = lambda code, **kw: loop_thread.call(made.run(code, **kw))
    made.check_healthy = lambda: _healthy(made, loop_thread)
    yield made
    loop_thread.call(made.aclose())


def _healthy(pool, loop_thread):
    result = pool.call("print(sum(range(10)))")
    assert (result.status, result.stdout) == (Status.OK, "45\n"), result
    assert loop_thread.call(pool.health())["ok"]


@pytest.fixture(scope="module")
def loopback_server():
    """A listening TCP server on the host's loopback: the sandbox must not reach it."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(2)
    server.close()


def test_no_network(pool, loopback_server):
    port, accepted = loopback_server
    code = f"""
import socket, os
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("CONNECTED")
except OSError as exc:
    print("refused", exc.errno)
print(sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else "no-sys")
print(open("/proc/net/dev").read().count(":"))
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    assert "CONNECTED" not in result.stdout and "refused" in result.stdout
    assert result.stdout.splitlines()[-1] == "1", "only the loopback interface may exist"
    assert accepted == []
    pool.check_healthy()


def test_host_files_are_invisible(pool, tmp_path_factory):
    secret = tmp_path_factory.mktemp("host") / "secret.txt"
    secret.write_text("host secret")
    secret.chmod(0o644)
    paths = ["/etc/shadow", str(ROOT / "README.md"), str(secret), "/root", "/home"]
    code = f"""
import os
for path in {paths!r}:
    try:
        if os.path.isdir(path):
            print(path, "LISTED", os.listdir(path))
        else:
            print(path, "READ", open(path).read(40))
    except OSError as exc:
        print(path, "denied", type(exc).__name__)
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    assert "host secret" not in result.stdout
    for line in result.stdout.splitlines():
        if line.startswith(("/etc/shadow", str(ROOT), str(secret))):
            assert "denied" in line, line
        if "LISTED" in line:
            assert line.endswith("[]"), line  # an image's own empty /root or /home at most
    pool.check_healthy()


def test_cannot_write_outside_the_work_dir(pool, tmp_path):
    code = """
import os
for path in ["/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/proc/sys/kernel/hostname"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        print(path, "WROTE")
    except OSError as exc:
        print(path, "denied")
open("/tmp/mine", "w").write("ok")
open("here.txt", "w").write("ok")
print(os.getcwd())
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    assert "WROTE" not in result.stdout
    assert result.stdout.splitlines()[-1] == "/work"
    # the next call starts clean: nothing of this one is left
    after = pool.call("import os; print(os.listdir('.'), os.listdir('/tmp'))")
    assert after.stdout == "[] []\n", after


def test_fork_bomb(pool):
    result = pool.call(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    assert result.status in (Status.TIMEOUT, Status.ERROR), result
    bash = pool.call(":(){ :|:& };:", language="bash")
    assert bash.status in (Status.TIMEOUT, Status.ERROR, Status.OK), bash
    leftovers = pool.call("import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert int(leftovers.stdout) <= 3, leftovers  # the server, this call (and bwrap's init)
    pool.check_healthy()


def test_memory_bomb(pool):
    result = pool.call("x = []\nwhile True:\n    x.append(bytearray(50 * 2**20))")
    assert result.status is Status.MEMORY, result
    assert "MemoryError" in result.stderr
    pool.check_healthy()


def test_endless_loop_and_sleeping_forever(pool):
    for code in ("while True: pass", "import time; time.sleep(10**6)"):
        start = time.monotonic()
        result = pool.call(code, timeout_s=1)
        assert result.status is Status.TIMEOUT, result
        assert time.monotonic() - start < 5
    # a process left behind in the background does not outlive its call
    pool.call("import subprocess; subprocess.Popen(['sleep', '1000'])")
    procs = pool.call(
        "import os\nprint([open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()])"
    )
    assert "sleep" not in procs.stdout, procs
    pool.check_healthy()


def test_huge_output(pool):
    result = pool.call("import sys\nwhile True: sys.stdout.write('x' * 65536)")
    assert result.status is Status.OUTPUT_LIMIT, result
    assert len(result.stdout) < 4096 + 200 and "output cut" in result.stdout
    disk = pool.call("open('big', 'wb').write(b'0' * (64 << 20))")
    assert disk.status is Status.ERROR, disk  # file size and work-dir size are bounded
    pool.check_healthy()


def test_signalling_the_parent(pool):
    for code in (
        "import os, signal; os.kill(os.getppid(), signal.SIGKILL)",
        "import os, signal; os.kill(1, signal.SIGKILL); os.kill(1, signal.SIGTERM)",
        "import os, signal; os.kill(-1, signal.SIGKILL)",
    ):
        result = pool.call(code)
        assert result.status in (Status.OK, Status.ERROR), result
    pool.check_healthy()


def test_proc_tricks(pool):
    code = """
import ctypes, os
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
for path in ["/proc/1/environ", "/proc/1/mem", "/proc/1/fd/0", "/proc/1/root/etc/shadow",
             "/proc/sysrq-trigger", "/proc/kcore"]:
    try:
        with open(path, "rb") as f:
            f.read(16)
        print(path, "OPENED")
    except OSError:
        print(path, "denied")
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.ptrace(16, 1, 0, 0))   # PTRACE_ATTACH to the server
print("uid", os.getuid())
try:
    os.setuid(0)
    print("SETUID")
except OSError:
    print("setuid denied")
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    assert "OPENED" not in result.stdout and "SETUID" not in result.stdout, result.stdout
    assert "ptrace -1" in result.stdout
    pids = eval(result.stdout.splitlines()[0].split(" ", 1)[1])
    assert len(pids) <= 3, pids  # its own namespace: none of the host's processes
    assert "uid 0" not in result.stdout
    pool.check_healthy()


def test_no_call_sees_a_previous_calls_files_wherever_written(pool):
    """Write a marker into every directory of every writable mount (and every mount point),
    then look for each from the next call on the same warm sandbox."""
    plant = """
import os
mounts = [line.split() for line in open("/proc/self/mounts")]
places = {m[1] for m in mounts if not m[1].startswith(("/proc", "/sys"))}
for m in mounts:
    if "rw" in m[3].split(",") and not m[1].startswith(("/proc", "/sys")):
        places.update(root for root, _, _ in os.walk(m[1]))
written = []
for root in sorted(places):
    path = os.path.join(root, "planted-by-an-earlier-call")
    try:
        with open(path, "w") as f:
            f.write("x")
        written.append(path)
    except OSError:
        pass
print(written)
"""
    result = pool.call(plant)
    assert result.status is Status.OK, result
    written = eval(result.stdout)
    assert "/work/planted-by-an-earlier-call" in written
    assert "/dev/shm/planted-by-an-earlier-call" in written
    assert not any(p.startswith("/dev/planted") for p in written), written  # /dev is read-only
    look = pool.call(f"import os\nprint([p for p in {written!r} if os.path.exists(p)])")
    assert look.stdout == "[]\n", look
    pool.check_healthy()


def test_dev_shm_is_bounded_by_the_work_size(pool):
    code = """
import os
chunk = b"0" * (1 << 20)
written = 0
try:
    with open("/dev/shm/fill", "wb") as f:
        while written < (64 << 20):
            f.write(chunk)
            f.flush()
            written += len(chunk)
except OSError as exc:
    print("stopped", exc.errno)
print(written >> 20)
"""
    result = pool.call(code)
    assert "stopped" in result.stdout, result
    assert int(result.stdout.split()[-1]) <= LIMITS.work_mb, result
    assert pool.call("import os; print(os.listdir('/dev/shm'))").stdout == "[]\n"
    pool.check_healthy()


def test_no_nested_namespaces_or_mounts(pool):
    code = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
print("unshare", libc.unshare(0x10000000 | 0x00020000))  # CLONE_NEWUSER | CLONE_NEWNS
run = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=100g t /work"],
                     capture_output=True, text=True)
print("tool", run.returncode)
print(os.statvfs("/work").f_blocks * os.statvfs("/work").f_frsize >> 20)
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    lines = result.stdout.splitlines()
    assert lines[0] == "unshare -1" and lines[1] != "tool 0", result
    assert int(lines[2]) <= LIMITS.work_mb
    pool.check_healthy()


def test_memory_that_skips_the_limit_or_outlives_a_call_is_refused(pool):
    """SysV segments and memfds hold pages no rlimit counts; SysV objects and POSIX queues
    outlive the call in the sandbox's IPC namespace."""
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("shmget", libc.shmget(0, 512 << 20, 0o1600), ctypes.get_errno())  # IPC_CREAT | 0600
print("msgget", libc.msgget(0, 0o1600))
print("semget", libc.semget(0, 1, 0o1600))
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
print("mq_open", rt.mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o600, None))
try:
    os.memfd_create("parked")
    print("memfd MADE")
except OSError as exc:
    print("memfd", exc.errno)
import multiprocessing
lock = multiprocessing.Lock()  # POSIX semaphores (in /dev/shm) still work
with lock:
    print("lock ok")
"""
    result = pool.call(code)
    assert result.status is Status.OK, result
    lines = result.stdout.splitlines()
    assert lines[0] == "shmget -1 1", result  # EPERM
    assert lines[1:5] == ["msgget -1", "semget -1", "mq_open -1", "memfd 1"], result
    assert lines[5] == "lock ok"
    pool.check_healthy()


FORGE = r"""
import json, os, struct
reply = {"status": "ok", "exit_code": 0, "stdout": "FORGED\n", "stderr": "", "duration": 0,
         "files": {}, "clean": True}
frame = json.dumps(reply).encode()
for fd in range(3, 256):
    for data in (struct.pack(">I", len(frame)) + frame, json.dumps(reply).encode()):
        try:
            os.write(fd, data)
        except OSError:
            pass
print("own output")
"""


def test_session_results_come_from_the_guest_never_the_code(pool, loop_thread):
    async def scenario():
        async with pool.session() as session:
            forged = await session.run(FORGE)
            later = [await session.run(f"print({i})") for i in range(3)]
            memfd = await session.run("import os\nos.memfd_create('parked')")
            return forged, later, memfd, session.restarts

    forged, later, memfd, restarts = loop_thread.call(scenario())
    assert memfd.status is Status.ERROR and "PermissionError" in memfd.stderr  # filtered too
    assert "FORGED" not in forged.stdout and "own output" in forged.stdout, forged
    assert [r.stdout for r in later] == ["0\n", "1\n", "2\n"], later
    assert all(r.status is Status.OK for r in later) and restarts == 0
    pool.check_healthy()


HOLD_EVERY_PROCESS = """
import os, time
held = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(4)
            os._exit(0)
        held += 1
    except OSError:
        break
print(held, flush=True)
time.sleep(4)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sandbox_at_its_process_limit_leaves_the_others_theirs(backend, loop_thread):
    """RLIMIT_NPROC counts a host user's processes: each sandbox runs as a user of its own, so
    one holding every process it may have does not stop another from starting one."""

    async def both() -> tuple:
        pools = [SandboxPool(backend, size=1, limits=LIMITS, health_interval_s=0) for _ in "ab"]
        try:
            for made in pools:
                await made.start()
            holding = asyncio.create_task(pools[0].run(HOLD_EVERY_PROCESS, timeout_s=6))
            await asyncio.sleep(2)  # the first sandbox is at its limit now
            started = await pools[1].run(
                "import subprocess; print(subprocess.run(['true']).returncode)"
            )
            return await holding, started
        finally:
            for made in pools:
                await made.aclose()

    holding, started = loop_thread.call(both())
    assert int(holding.stdout.split()[0]) >= LIMITS.processes - 4, holding
    assert (started.status, started.stdout) == (Status.OK, "0\n"), started


def test_a_containers_log_on_the_hosts_disk_stays_bounded(loop_thread):
    """Every call's output passes through a Docker container's log: 200 calls of 50 kB
    each (10 MB, under the output cap, so the container is kept) leave at most about a
    megabyte of it on the host's disk."""
    import subprocess
    from pathlib import Path

    async def flood() -> list[int]:
        limits = replace(LIMITS, output_bytes=64_000)
        async with SandboxPool("docker", size=1, limits=limits, health_interval_s=0) as pool:
            for _ in range(200):
                result = await pool.run("import sys\nsys.stdout.write('x' * 50_000)")
                assert result.status is Status.OK, result
            ids = subprocess.run(["docker", "ps", "-q", "--filter", "label=toolgym.sandbox"],
                                 capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
            sizes = []
            for container in ids:
                path = subprocess.run(["docker", "inspect", "--format", "{{.LogPath}}", container],
                                      capture_output=True, text=True).stdout.strip()  # fmt: skip
                if path and Path(path).is_file():
                    sizes.append(Path(path).stat().st_size)
            return sizes

    sizes = loop_thread.call(flood())
    assert sizes and max(sizes) <= 1_100_000, sizes
