"""The referee: the program that runs a code task's hidden tests inside the sandbox, with the
submission in a process of its own. Sent as the code of one sandbox run (standard library
only), the task on its stdin; never imported by the host.

Why two processes: in one interpreter a submission can read or rewrite anything the tests
can (a "tests finished" token among its own code's constants, the test source in linecache,
the assert itself, `os._exit(0)` before it). Here:
- The submission runs in a fresh interpreter (`python -I -c`, so nothing of this process's
  memory, the tests included, is in it) and answers calls of its function over a pipe.
- The tests run here, in a process the submission cannot ptrace or open through /proc (it
  is not dumpable) and whose imports never look in the work dir the submission can write.
- Values cross as tagged JSON and are rebuilt here as plain builtins, so a test compares
  real ints, strings and lists, never an object of the submission's with its own `__eq__`.
- The verdict is the one line this process writes on its stdout, which no other process
  holds. The submission's own output goes nowhere.

What the submission can still do: stop this process (a signal, a limit), which fails it.
What a test cannot do: pass a function to the submission, or see arguments it mutated.
"""

import base64
import builtins
import contextlib
import ctypes
import json
import os
import struct
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any

MAX_FRAME = 16 << 20
MAX_DEPTH = 200
WHY_CHARS = 300


class Unsupported(Exception):
    """A value the other side could not rebuild as plain data."""


def encode(value, depth=0):
    """A value as JSON with tags for what JSON lacks (tuple, dict with any keys, set, bytes,
    complex); lenient on the submission's side (a namedtuple is a tuple)."""
    if depth > MAX_DEPTH:
        raise Unsupported("a value nested too deep")
    if value is None or isinstance(value, (bool, str)):
        return str(value) if isinstance(value, str) else value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    inner = depth + 1
    if isinstance(value, list):
        return [encode(item, inner) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(item, inner) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, inner), encode(v, inner)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        kind = "frozenset" if isinstance(value, frozenset) else "set"
        return {kind: [encode(item, inner) for item in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    raise Unsupported(f"a {type(value).__name__}")


REBUILD: dict[str, Callable[[Any], Any]] = {
    "tuple": tuple,
    "dict": dict,
    "set": set,
    "frozenset": frozenset,
    "bytes": lambda text: base64.b64decode(text.encode(), validate=True),
    "complex": lambda parts: complex(*parts),
}


def rebuild(tagged):
    """JSON object hook: each object is one tag; anything else is not a value."""
    if len(tagged) != 1:
        raise Unsupported("an untagged object")
    ((tag, body),) = tagged.items()
    if tag not in REBUILD:
        raise Unsupported(f"an unknown tag {tag[:20]!r}")
    return REBUILD[tag](body)


def decode(data):
    """Plain builtins from a frame, or Unsupported: no object of the sender's survives."""
    try:
        return json.loads(data, object_hook=rebuild)
    except Unsupported:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise Unsupported(f"an unreadable value ({type(exc).__name__})") from None


class Pipe:
    """Length-prefixed frames over two descriptors."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd

    def send(self, obj):
        data = json.dumps(obj).encode()
        data = struct.pack(">I", len(data)) + data
        while data:
            data = data[os.write(self.wfd, data) :]

    def recv_bytes(self):
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">I", head)
        if size > MAX_FRAME:
            return None
        return self._read(size)

    def _read(self, n):
        chunks = []
        while n:
            chunk = os.read(self.rfd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def last_line(exc):
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:WHY_CHARS]


def serve():
    """The submission's side: load the code, then answer calls until the pipe closes."""
    pipe = Pipe(os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    job = json.loads(pipe.recv_bytes())
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "solution.py", "exec"), namespace)
        function = namespace[job["entry_point"]]
        if not callable(function):
            raise TypeError(f"{job['entry_point']} is not a function")
    except KeyError:
        pipe.send(["load_error", f"your code does not define {job['entry_point']}"])
        return
    except BaseException as exc:
        pipe.send(["load_error", last_line(exc)])
        return
    pipe.send(["ready"])
    while True:
        data = pipe.recv_bytes()
        if data is None:
            return
        _, args, kwargs = decode(data)
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:
            pipe.send(["raised", type(exc).__name__])
            continue
        try:
            pipe.send(["value", encode(value)])
        except (Unsupported, ValueError, RecursionError) as exc:
            pipe.send(["unsupported", str(exc) or type(exc).__name__])


class Gone(BaseException):
    """The submission stopped answering (it exited, crashed or sent garbage)."""


class Failure(BaseException):
    """Why the submission failed, in words safe to show: never a test's text or values. A
    BaseException, so a test's `except Exception` (expecting an error) cannot take it."""


class Candidate:
    """The submission's function, as the tests call it: a proxy to the other process."""

    def __init__(self, process, name):
        self.process = process
        self.pipe = Pipe(process.stdout.fileno(), process.stdin.fileno())
        self.__name__ = name
        self.raised = []
        self.broken = None
        """The first Failure or Gone, so a test that swallows it still fails the run."""

    def __call__(self, *args, **kwargs):
        try:
            return self._call(args, kwargs)
        except (Failure, Gone) as exc:
            self.broken = self.broken or exc
            raise

    def _call(self, args, kwargs):
        try:
            self.pipe.send(["call", encode(list(args)), encode(kwargs)])
        except Unsupported as exc:
            raise Failure(f"a hidden test passes {exc}, which cannot reach your code") from None
        except OSError:
            raise Gone() from None
        data = self.pipe.recv_bytes()
        if data is None:
            raise Gone()
        kind, body = decode_reply(data)
        if kind == "value":
            return body
        if kind == "raised":
            error = exception_named(body)
            self.raised.append(error)
            raise error
        raise Failure(f"your function returned {body[:100]}, which the tests cannot compare "
                      "(return numbers, strings, lists, tuples, dicts, sets or None)")  # fmt: skip


def decode_reply(data):
    """(kind, body) of a reply: ["value", v], ["raised", class name] or ["unsupported", what]."""
    try:
        reply = decode(data)
    except Unsupported as exc:
        raise Failure(f"your function returned {exc}") from None
    if not (isinstance(reply, list) and len(reply) == 2):
        raise Gone()
    kind, body = reply
    if kind == "value" or (kind in ("raised", "unsupported") and isinstance(body, str)):
        return kind, body
    raise Gone()


def exception_named(name):
    """An exception of the builtin class the submission raised (or RuntimeError): tests that
    expect a ValueError see one, and nothing of the submission's class comes across."""
    kind = getattr(builtins, name[:100], None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    return kind("raised by the submission")


def undumpable():
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0


def referee():
    """The tests' side: start the submission, run the tests against it, print the verdict."""
    undumpable()
    report = os.dup(1)
    os.set_inheritable(report, False)
    work = os.getcwd()
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != os.path.realpath(work)]
    task = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir("/")
    verdict = judge(task, work)
    os.write(report, (json.dumps(verdict) + "\n").encode())
    os._exit(0)


def judge(task, work):
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", task["referee"], "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        cwd=work,
    )
    candidate = Candidate(process, task["entry_point"])
    try:
        code = f"{task['setup']}\n{task['code']}\n"  # the setup's imports and helpers first
        candidate.pipe.send({"code": code, "entry_point": task["entry_point"]})
        data = candidate.pipe.recv_bytes()
        opening = decode(data) if data is not None else None
        if opening != ["ready"]:
            if isinstance(opening, list) and len(opening) == 2 and opening[0] == "load_error":
                return failed(f"your code did not load: {str(opening[1])[:WHY_CHARS]}")
            return failed("your code stopped before it was ready")
        return run_tests(task, candidate)
    except (Gone, OSError, Unsupported):
        return failed("your code stopped answering during the tests")
    finally:
        with contextlib.suppress(OSError):
            process.kill()


def run_tests(task, candidate):
    namespace: dict[str, Any] = {"__name__": "__tests__", "__builtins__": builtins}
    try:
        exec(compile(task["setup"], "setup.py", "exec"), namespace)
        namespace[task["entry_point"]] = candidate
        exec(compile(task["tests"], "tests.py", "exec"), namespace)
        if task["calls_check"]:
            namespace["check"](candidate)
    except Failure as exc:
        return failed(str(exc))
    except Gone:
        return failed("your code stopped answering during the tests")
    except BaseException as exc:
        if any(exc is raised for raised in candidate.raised):
            return failed(f"your function raised {type(exc).__name__} on a hidden test")
        if isinstance(exc, AssertionError):
            return failed("a hidden test failed")
        return failed(f"a hidden test failed ({type(exc).__name__})")
    if candidate.broken is not None:
        return failed(str(candidate.broken) or "your code stopped answering during the tests")
    return {"passed": True, "why": "passed"}


def failed(why):
    return {"passed": False, "why": why}


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        referee()
