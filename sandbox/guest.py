"""The program that runs inside a sandbox: standard library only, sent as `python3 -c` source,
so a sandbox needs an interpreter and nothing of ours on its file system.

It speaks frames (4-byte big-endian length, then UTF-8 JSON) over its stdin and stdout, which
it moves to private descriptors at start so that no code it runs can write a frame. Two modes:

- `fork`: a fork server. Each `run` request forks a child that runs the code with rlimits in
  a fresh work dir; the server reads its output (capped), enforces the wall-clock limit, then
  kills every other process in the sandbox and wipes the work dir, /tmp and /dev/shm, so
  calls on one warm sandbox never see each other. A short call costs a fork, not an interpreter start.
- `repl`: one persistent Python namespace (a session), held by a worker process the guest
  forks at start. Each `exec` request hands the worker a cell with fresh pipes for its
  output and its end; the guest reads them and answers the host itself, so code in a cell
  can forge nothing the host reads, and a cell's stray writes die with its pipes. A cell past
  its time limit is interrupted by SIGALRM; one that does not stop within a grace period
  costs the worker, and the reply says the session is lost.

With `contained` (the backend gives the sandbox its own pid and IPC namespaces) the server
cleans up by killing every other process of the sandbox, which there reaches only the
sandbox's own, and the code runs under a seccomp filter that refuses SysV IPC objects and
memfds (memory no rlimit counts, state that would outlive a call); the unisolated local
backend never passes it, and then only the code's process group is killed. POSIX message queues are refused to the code by
RLIMIT_MSGQUEUE = 0 on every backend.
"""

import base64
import contextlib
import ctypes
import io
import json
import linecache
import os
import resource
import select
import selectors
import shutil
import signal
import socket
import struct
import sys
import time
import traceback

WORK = os.environ.get("TOOLGYM_WORK", "/work")
TMP = os.environ.get("TOOLGYM_TMP", "/tmp")
SHM = os.environ.get("TOOLGYM_SHM")
"""The sandbox's own /dev/shm, wiped with the work dir; unset where it is the host's."""
MAX_FRAME = 256 << 20
SETTLE_S = 0.05
"""After the code's process exits, how long to wait for output still held by its children."""


class Channel:
    """Frames over two descriptors the code cannot reach (moved high, close-on-exec)."""

    def __init__(self):
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        for fd in (self.rfd, self.wfd):
            os.set_inheritable(fd, False)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.close(null)

    def recv(self):
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">I", head)
        if size > MAX_FRAME:
            raise ValueError("frame too large")
        body = self._read(size)
        return None if body is None else json.loads(body)

    def send(self, obj):
        data = json.dumps(obj).encode()
        data = struct.pack(">I", len(data)) + data
        while data:
            data = data[os.write(self.wfd, data) :]

    def _read(self, size):
        chunks, left = [], size
        while left:
            chunk = os.read(self.rfd, min(left, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def make_undumpable():
    """No other process of the sandbox's user may ptrace this one or open its /proc files."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0


def set_limits(limits, cpu_s):
    mb = 1 << 20
    pairs = [
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_NPROC, limits["processes"]),
        (resource.RLIMIT_FSIZE, limits["file_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
    ]
    for kind, value in pairs:
        if value is None:
            continue
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):
            soft, hard = resource.getrlimit(kind)
            if hard != resource.RLIM_INFINITY and value > hard:
                resource.setrlimit(kind, (hard, hard))
            else:
                raise


def safe_path(name):
    """A path inside the work dir, or ValueError for anything that would leave it."""
    if not isinstance(name, str) or not name or "\0" in name or name.startswith("/"):
        raise ValueError(f"file names are relative paths inside the work dir: {name!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"file names may not contain '', '.' or '..' parts: {name!r}")
    return os.path.join(WORK, *parts)


def write_files(files):
    for name, data in (files or {}).items():
        path = safe_path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))


def read_files(names, limit):
    out: dict = {}
    for name in names or []:
        try:
            path = safe_path(name)
            if os.path.islink(path) or not os.path.isfile(path):
                out[name] = None
                continue
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
            out[name] = None if len(data) > limit else base64.b64encode(data).decode()
        except (ValueError, OSError):
            out[name] = None
    return out


def wipe(*roots):
    """Empty the given directories; False if something would not go."""
    clean = True
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            path = os.path.join(root, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    for sub, dirs, _ in os.walk(path):
                        for d in dirs:
                            os.chmod(os.path.join(sub, d), 0o700)
                    os.chmod(path, 0o700)
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                clean = False
    return clean


def kill_others(contained, group):
    """Stop every process the code left. Contained: all but this one (and init); else its group."""
    for _ in range(50):
        try:
            if contained:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            break
        except PermissionError:
            break
        reap()
        time.sleep(0.001)
    reap()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Capture:
    """Reads two streams, keeping at most `cap` bytes of each and counting the rest."""

    def __init__(self, cap):
        self.cap = cap
        self.kept = {1: bytearray(), 2: bytearray()}
        self.total = {1: 0, 2: 0}

    def take(self, which, chunk):
        self.total[which] += len(chunk)
        room = self.cap - len(self.kept[which])
        if room > 0:
            self.kept[which] += chunk[:room]

    @property
    def over(self):
        return any(t > self.cap for t in self.total.values())

    def text(self, which):
        text = self.kept[which].decode("utf-8", "replace")
        if self.total[which] > self.cap:
            text += f"\n[... output cut at {self.cap} bytes; {self.total[which]} in all]"
        return text


def python_child(code):
    """In the forked child: run `code` as __main__ and leave with its exit code."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.argv = ["main.py"]
    sys.path[:0] = [WORK]
    status = 0
    try:
        exec(compile_cell(code, "main.py"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as exc:
        status = exit_status(exc)
    except MemoryError:
        status = 1
        print_error()
        os.write(3, b"M")
    except BaseException:
        status = 1
        print_error()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(status)


def compile_cell(code, name):
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    return compile(code, name, "exec")


def exit_status(exc):
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(BaseException):
        sys.stderr.write(str(exc.code) + "\n")
    return 1


def print_error():
    """The traceback as Python prints it, less this program's own frames (its source is
    `-c`, so they are the leading frames named "<string>")."""
    kind, value, tb = sys.exc_info()
    while (
        tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == "<string>"
    ):
        tb = tb.tb_next
    with contextlib.suppress(BaseException):
        traceback.print_exception(kind, value, tb, file=sys.stderr)


def run_forked(req, contained):
    """One `run` request: fork, run, collect, clean. Returns the reply."""
    limits = req["limits"]
    timeout = float(req["timeout"])
    cap = int(req["output_bytes"])
    try:
        write_files(req.get("files"))
    except (ValueError, OSError) as exc:
        return {"status": "error", "setup_error": str(exc)}
    stdin = os.memfd_create("stdin")
    os.write(stdin, base64.b64decode(req.get("stdin", "")))
    os.lseek(stdin, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    flag_r, flag_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            for fd, target in ((stdin, 0), (out_w, 1), (err_w, 2), (flag_w, 3)):
                os.dup2(fd, target)
            os.closerange(4, 1 << 16)
            os.chdir(WORK)
            set_limits(limits, int(timeout) + 1)
            restrict_code()
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            if req["language"] == "bash":
                os.execve("/bin/bash", ["bash", "-c", req["code"]], child_env())
            os.environ.clear()
            os.environ.update(child_env())
            python_child(req["code"])
        except BaseException as exc:
            try:
                os.write(2, (f"sandbox: could not start the code: {exc}\n").encode())
            finally:
                os._exit(126)
    for fd in (stdin, out_w, err_w, flag_w):
        os.close(fd)
    capture = Capture(cap)
    status, code, sig = collect(pid, out_r, err_r, capture, start + timeout)
    duration = time.monotonic() - start
    flag = b""
    try:
        os.set_blocking(flag_r, False)
        flag = os.read(flag_r, 1)
    except OSError:
        pass
    for fd in (out_r, err_r, flag_r):
        os.close(fd)
    kill_others(contained, pid)
    if status == "done":
        status = "memory" if flag == b"M" or (sig == signal.SIGKILL and not contained) else None
        if status is None:
            status = "output_limit" if capture.over else ("ok" if code == 0 else "error")
    elif status == "output_limit" and flag == b"M":
        status = "memory"
    files = read_files(req.get("fetch_files"), int(req.get("file_bytes", 1 << 20)))
    clean = wipe(WORK, TMP, *([SHM] if SHM else []))
    return {
        "status": status,
        "exit_code": code,
        "signal": sig,
        "stdout": capture.text(1),
        "stderr": capture.text(2),
        "duration": duration,
        "files": files,
        "clean": clean,
    }


def child_env():
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": WORK,
        "TMPDIR": TMP,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def collect(pid, out_r, err_r, capture, deadline):
    """Read output until the process exits (and its streams close or settle), the deadline
    passes, or the output runs far past the cap. Returns (status, exit code, signal)."""
    selector = selectors.DefaultSelector()
    selector.register(out_r, selectors.EVENT_READ, 1)
    selector.register(err_r, selectors.EVENT_READ, 2)
    pidfd = os.pidfd_open(pid)
    selector.register(pidfd, selectors.EVENT_READ, 0)
    open_streams, exited, settle_until, result = 2, None, None, "done"
    try:
        while open_streams and (settle_until is None or time.monotonic() < settle_until):
            now = time.monotonic()
            if now >= deadline:
                result = "timeout"
                break
            wait = deadline - now if settle_until is None else settle_until - now
            for key, _ in selector.select(max(wait, 0)):
                if key.data == 0:
                    exited = os.waitpid(pid, 0)[1]
                    selector.unregister(pidfd)
                    settle_until = time.monotonic() + SETTLE_S
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    open_streams -= 1
                else:
                    capture.take(key.data, chunk)
            if capture.over and any(t > 4 * capture.cap for t in capture.total.values()):
                result = "output_limit"
                break
    finally:
        selector.close()
        os.close(pidfd)
    if exited is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        exited = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(exited):
        return result, 128 + os.WTERMSIG(exited), os.WTERMSIG(exited)
    return result, os.WEXITSTATUS(exited), None


class CellTimeout(BaseException):
    """Raised into a cell by SIGALRM: past its time limit."""


def on_alarm(signum, frame):
    raise CellTimeout()


CELL_GRACE_S = 1.0
"""How long past a cell's time limit the guest waits for the worker before it kills it."""
DONE_BYTES = 4096
END_WAIT_S = 0.5
"""How long a cell's end pipe may close without a frame before the worker is taken as dead."""
CELL_STATUSES = ("ok", "error", "timeout", "memory")


class ReplHost:
    """A session, seen from the guest: a worker process holds the namespace and runs each
    cell; the guest hands it the cell with fresh pipes for its output and its end, reads them
    itself, and answers the host. Nothing the code writes can become a reply: the code can
    reach only this cell's pipes (the worker's), never the guest's channel."""

    def __init__(self, contained, limits, channel):
        self.contained = contained
        self.control, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.worker = os.fork()
        if self.worker == 0:
            try:
                for fd in (channel.rfd, channel.wfd, self.control.fileno()):
                    os.close(fd)
                ReplWorker(worker_end, limits).serve()
            finally:
                os._exit(0)
        worker_end.close()

    def run(self, req):
        cap = int(req["output_bytes"])
        try:
            write_files(req.get("files"))
        except (ValueError, OSError) as exc:
            return {"status": "error", "setup_error": str(exc)}
        timeout = float(req["timeout"])
        cell = os.memfd_create("cell")
        os.write(cell, json.dumps({"code": req["code"], "timeout": timeout}).encode())
        os.lseek(cell, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        done_r, done_w = os.pipe()
        start = time.monotonic()
        with contextlib.suppress(OSError):  # a worker that is gone: collect sees it at once
            socket.send_fds(self.control, [b"cell"], [cell, out_w, err_w, done_w])
        for fd in (cell, out_w, err_w, done_w):
            os.close(fd)
        capture = Capture(cap)
        done, lost = self.collect(out_r, err_r, done_r, capture, start + timeout + CELL_GRACE_S)
        duration = time.monotonic() - start
        for fd in (out_r, err_r, done_r):
            os.close(fd)
        if self.contained:
            kill_all_but(self.worker)
        status, code = cell_status(done) or ("error", 1)
        if lost:
            status, code = ("timeout" if lost == "timeout" else "error"), None
        elif status == "ok" and capture.over:
            status = "output_limit"
        return {
            "status": status,
            "exit_code": code,
            "signal": None,
            "stdout": capture.text(1),
            "stderr": capture.text(2),
            "duration": duration,
            "files": read_files(req.get("fetch_files"), int(req.get("file_bytes", 1 << 20))),
            "clean": True,
            "lost": lost,
        }

    def collect(self, out_r, err_r, done_r, capture, deadline):
        """Read the cell's output and its end frame until the worker reports the end (then
        until the streams close or settle). Returns (end frame, None), or (what it read, why
        the worker is lost: "timeout" past the deadline, "ended" when it died)."""
        selector = selectors.DefaultSelector()
        selector.register(out_r, selectors.EVENT_READ, 1)
        selector.register(err_r, selectors.EVENT_READ, 2)
        selector.register(done_r, selectors.EVENT_READ, 3)
        pidfd = os.pidfd_open(self.worker)
        selector.register(pidfd, selectors.EVENT_READ, 0)
        done, streams, settle_until, lost = bytearray(), 2, None, None
        try:
            while True:
                now = time.monotonic()
                if settle_until is not None:
                    if now >= settle_until or streams == 0:
                        break
                    wait = settle_until - now
                elif now >= deadline:
                    lost = "timeout"
                    break
                else:
                    wait = deadline - now
                for key, _ in selector.select(wait):
                    if key.data == 0:
                        selector.unregister(pidfd)
                        if cell_status(done) is None:
                            lost, settle_until = "ended", now + SETTLE_S
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if key.data == 3:
                        done += chunk[: max(DONE_BYTES - len(done), 0)]
                        if not chunk or len(done) >= DONE_BYTES:
                            selector.unregister(key.fd)
                            settle_until = time.monotonic() + SETTLE_S
                    elif chunk:
                        capture.take(key.data, chunk)
                    else:
                        selector.unregister(key.fd)
                        streams -= 1
            if not lost and cell_status(done) is None and wait_readable(pidfd, END_WAIT_S):
                lost = "ended"  # the worker died, or the code closed its end pipe
        finally:
            selector.close()
            os.close(pidfd)
            if lost:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.worker, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.worker, 0)
        return bytes(done), lost


def cell_status(done):
    """The worker's end frame as (status, exit code); None if it is missing or malformed."""
    try:
        frame = json.loads(done)
        status, code = frame["status"], frame["exit_code"]
    except (ValueError, KeyError, TypeError):
        return None
    if status in CELL_STATUSES and isinstance(code, int) and 0 <= code < 256:
        return status, code
    return None


def wait_readable(fd, timeout_s):
    return bool(select.select([fd], [], [], timeout_s)[0])


def kill_all_but(keep):
    """Stop every process of the sandbox but this one and `keep` (zombies are left to their
    parents to reap)."""
    me = os.getpid()
    for _ in range(50):
        alive = [pid for pid in sandbox_pids() if pid not in (me, keep)]
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        reap()
        time.sleep(0.001)
    reap()


def sandbox_pids():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


class ReplWorker:
    """A session's namespace, in its own process: each cell arrives with the pipes to write
    its output and its end frame to."""

    def __init__(self, control, limits):
        self.control = control
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cells = 0
        if limits:
            set_limits(limits, None)
        restrict_code()
        os.chdir(WORK)
        os.environ.clear()
        os.environ.update(child_env())
        sys.path[:0] = [WORK]
        signal.signal(signal.SIGALRM, on_alarm)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.null = os.open(os.devnull, os.O_RDWR)

    def serve(self):
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(self.control, 16, 4)
            except OSError:
                return
            if len(fds) != 4:
                for fd in fds:
                    os.close(fd)
                if not fds:
                    return  # the guest is gone
                continue
            cell, out_w, err_w, done_w = fds
            reap()
            try:
                with os.fdopen(cell, "rb") as handle:
                    request = json.loads(handle.read())
            except ValueError:
                request = {"code": "", "timeout": 0}
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_w)
            os.close(err_w)
            status, code = self.run(request)
            for fd in (1, 2):
                os.dup2(self.null, fd)
            with contextlib.suppress(OSError):
                os.write(done_w, json.dumps({"status": status, "exit_code": code}).encode())
            with contextlib.suppress(OSError):
                os.close(done_w)

    def run(self, request):
        self.cells += 1
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
        status, code = "ok", 0
        signal.setitimer(signal.ITIMER_REAL, float(request["timeout"]))
        try:
            self.exec_cell(request["code"], f"cell{self.cells}.py")
        except CellTimeout:
            status, code = "timeout", 1
            sys.stderr.write("TimeoutError: the cell ran past its time limit\n")
        except SystemExit as exc:
            code = exit_status(exc)
            status = "ok" if code == 0 else "error"
        except MemoryError:
            status, code = "memory", 1
            print_error()
        except BaseException:
            status, code = "error", 1
            print_error()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        return status, code

    def exec_cell(self, code, name):
        """Run a cell; a last bare expression is shown as a REPL would (its repr)."""
        import ast

        tree = ast.parse(code, name)
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), self.namespace)
        if last is not None:
            value = eval(compile(last, name, "eval"), self.namespace)
            if value is not None:
                print(repr(value))


SECCOMP_TABLES = {
    # machine: (AUDIT_ARCH_*, shmget, semget, msgget, memfd_create, x32 numbers to refuse)
    "x86_64": (0xC000003E, (29, 64, 68, 319), True),
    "aarch64": (0xC00000B7, (194, 190, 186, 279), False),
    "riscv64": (0xC00000F3, (194, 190, 186, 279), False),
}


class CodeFilter:
    """A seccomp filter for the code's processes (never the guest's own): creating SysV
    shared memory, semaphores or message queues, or a memfd, fails with EPERM, so code
    cannot park memory where no rlimit counts it (a memfd's pages, a detached segment) or
    leave state in the IPC namespace for the next call. Built once at start; a machine
    without a table here refuses to start rather than run code unfiltered."""

    def __init__(self):
        import platform

        machine = platform.machine()
        if machine not in SECCOMP_TABLES:
            raise SystemExit(f"sandbox guest: no seccomp table for this machine ({machine})")
        arch, numbers, x32 = SECCOMP_TABLES[machine]
        load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
        allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
        checks = ([(jge, 0x40000000)] if x32 else []) + [(jeq, n) for n in numbers]
        program = [(load, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (load, 0, 0, 0)]
        program += [(op, len(checks) - i, 0, k) for i, (op, k) in enumerate(checks)]
        program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]

        class Instruction(ctypes.Structure):
            _fields_ = [
                ("code", ctypes.c_ushort),
                ("jt", ctypes.c_ubyte),
                ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint),
            ]

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]

        self.instructions = (Instruction * len(program))(*[Instruction(*i) for i in program])
        self.program = Program(len(program), self.instructions)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_void_p,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]

    def install(self):
        """Put this process (and all it starts) under the filter; OSError if it cannot."""
        if self.libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "no_new_privs failed")
        address = ctypes.cast(ctypes.pointer(self.program), ctypes.c_void_p)
        if self.libc.prctl(22, 2, address, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError(ctypes.get_errno(), "seccomp failed")


CODE_FILTER = None
"""The filter code runs under in a contained sandbox (set at start)."""


def restrict_code():
    if CODE_FILTER is not None:
        CODE_FILTER.install()


def main(mode, contained):
    global CODE_FILTER
    channel = Channel()
    make_undumpable()
    if contained:
        CODE_FILTER = CodeFilter()
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(TMP, exist_ok=True)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    repl = None
    if mode == "repl":
        limits = json.loads(os.environ.get("TOOLGYM_LIMITS", "{}"))
        repl = ReplHost(contained, limits, channel)
    channel.send({"ready": True, "mode": mode, "python": sys.version.split()[0]})
    while True:
        req = channel.recv()
        if req is None or req.get("op") == "exit":
            return
        if req.get("op") == "ping":
            channel.send({"pong": True})
        elif repl is not None:
            channel.send(repl.run(req))
        else:
            channel.send(run_forked(req, contained))


if __name__ == "__main__":
    main(sys.argv[1], "contained" in sys.argv[2:])
