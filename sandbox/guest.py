"""The program that runs inside a sandbox: standard library only, sent as `python3 -c` source,
so a sandbox needs an interpreter and nothing of ours on its file system.

It speaks frames (4-byte big-endian length, then UTF-8 JSON) over its stdin and stdout, which
it moves to private descriptors at start so that no code it runs can write a frame. Two modes:

- `fork`: a fork server. Each `run` request forks a child that runs the code with rlimits in
  a fresh work dir; the server reads its output (capped), enforces the wall-clock limit, then
  kills every other process in the sandbox and wipes the work dir and /tmp, so calls on one
  warm sandbox never see each other. A short call costs a fork, not an interpreter start.
- `repl`: one persistent Python namespace (a session): each `exec` request runs a cell in it;
  variables survive between cells. A cell past its time limit is interrupted by SIGALRM, and
  the host kills the sandbox if even that does not stop it.

With `contained` (the backend gives the sandbox its own pid namespace) the server cleans up
with kill(-1), which there reaches only the sandbox's own processes; the unisolated local
backend never passes it, and then only the code's process group is killed.
"""

import base64
import contextlib
import ctypes
import io
import json
import linecache
import os
import resource
import selectors
import shutil
import signal
import struct
import sys
import threading
import time
import traceback

WORK = os.environ.get("TOOLGYM_WORK", "/work")
TMP = os.environ.get("TOOLGYM_TMP", "/tmp")
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
    """The traceback as Python prints it, less this program's own frame."""
    kind, value, tb = sys.exc_info()
    with contextlib.suppress(BaseException):
        traceback.print_exception(kind, value, tb.tb_next if tb else tb, file=sys.stderr)


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
    clean = wipe(WORK, TMP)
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


class ReplSession:
    """A persistent namespace; each cell's output is captured through pipes on fds 1 and 2."""

    def __init__(self, contained):
        self.contained = contained
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cells = 0
        os.chdir(WORK)
        os.environ.clear()
        os.environ.update(child_env())
        sys.path[:0] = [WORK]
        signal.signal(signal.SIGALRM, on_alarm)

    def run(self, req):
        cap = int(req["output_bytes"])
        try:
            write_files(req.get("files"))
        except (ValueError, OSError) as exc:
            return {"status": "error", "setup_error": str(exc)}
        self.cells += 1
        capture = Capture(cap)
        saved = [os.dup(1), os.dup(2)]
        readers = []
        for which in (1, 2):
            r, w = os.pipe()
            os.dup2(w, which)
            os.close(w)
            thread = threading.Thread(target=drain, args=(r, which, capture), daemon=True)
            thread.start()
            readers.append(thread)
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
        status, code = "ok", 0
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, float(req["timeout"]))
        try:
            self.exec_cell(req["code"], f"cell{self.cells}.py")
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
        duration = time.monotonic() - start
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        if self.contained:
            kill_others(True, 0)
        for which, fd in ((1, saved[0]), (2, saved[1])):
            os.dup2(fd, which)
            os.close(fd)
        for thread in readers:
            thread.join(1.0)
        if status == "ok" and capture.over:
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
        }

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


def drain(fd, which, capture):
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            capture.take(which, chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


def main(mode, contained):
    channel = Channel()
    make_undumpable()
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(TMP, exist_ok=True)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    repl = None
    if mode == "repl":
        limits = json.loads(os.environ.get("TOOLGYM_LIMITS", "{}"))
        if limits:
            set_limits(limits, None)
        repl = ReplSession(contained)
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
