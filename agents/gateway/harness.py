"""Agent harnesses the gateway plays: the user's own agent, as an async (or plain) Python
callable `agent(task, base_url, api_key) -> result`, or as a command that reads the URL and
key from OPENAI_BASE_URL and OPENAI_API_KEY and the task from TOOLGYM_TASK (JSON), and
prints its result. Each is given its session's URL and key, so any OpenAI client or agent
framework that takes a base_url records into the right episode.

A plain (not async) callable runs in a thread, off the run's loop: the gateway answers on
that loop, so an agent that blocked it would wait for itself. A thread cannot be stopped: a
plain agent that hangs past its timeout is abandoned (its episode masked, its session
closed so its calls are refused) but keeps its thread; an async agent or a command is
stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import shutil
import signal
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from toolgym.errors import ConfigError, ToolgymError, one_line
from toolgym.imports import load_callable

OUTPUT_LIMIT = 1 << 20
"""The most a command's result (its standard output) may hold."""


class HarnessFailed(ToolgymError, RuntimeError):
    """The agent raised or exited with an error: its episode is masked (unless the gateway
    had ended it by a budget, which is the policy's doing)."""


@dataclass(frozen=True)
class HarnessTask:
    """What an agent is given for one episode."""

    id: str
    """The episode's id."""
    prompt: str
    """The task in words: the env's opening user message."""
    messages: list[dict[str, Any]]
    """The env's opening messages (its system prompt describes the env's own tools, which
    an agent with tools of its own may ignore)."""
    seed: int | None
    """Never the task's own fields: they may hold its answer, gold query or tests, and an
    agent (or a tool of its, a shell) that could read them would be paid for copying."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, default=str)


class Harness(Protocol):
    name: str

    async def run(self, task: HarnessTask, base_url: str, api_key: str) -> Any:
        """Play the task with the model at `base_url`; return the agent's result."""
        ...


class CallableHarness:
    """`agent(task, base_url, api_key)`: awaited when it is async, else run in a thread."""

    def __init__(self, agent: Callable[..., Any], name: str = "") -> None:
        self.agent, self.name = agent, name or getattr(agent, "__qualname__", "agent")

    @classmethod
    def named(cls, path: str) -> CallableHarness:
        return cls(load_callable(path, "harness agent"), path)

    async def run(self, task: HarnessTask, base_url: str, api_key: str) -> Any:
        try:
            if inspect.iscoroutinefunction(self.agent):
                return await self.agent(task, base_url, api_key)
            result = await asyncio.to_thread(self.agent, task, base_url, api_key)
            return await result if inspect.isawaitable(result) else result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise HarnessFailed(
                f"the agent raised {type(exc).__name__}: {one_line(exc, 300)}"
            ) from exc


PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
              "TERM", "PYTHONPATH", "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip
"""The trainer's variables a command gets (where set), besides those `pass_env` names: never
its keys or tokens, which a policy could have the agent's shell read out."""
OUTPUT_GRACE_S = 2.0
"""After the command exits (and its processes are stopped), how long its output may take."""


class CommandHarness:
    """A command line run once per episode; its standard output, stripped, is the result.

    It gets an environment of PASSED_ENV and `pass_env` only (plus the session's URL, key
    and task). With `isolate` (the default) it runs in a PID and IPC namespace of its own
    (bubblewrap, the file system shared): it cannot see or signal the trainer or a sibling
    agent (their /proc, their keys and tasks), and every process it started ends when it
    exits, when its episode is stopped, or when the trainer dies. Without `isolate` its
    process group is ended as it exits; a process that left the group is out of reach."""

    def __init__(
        self, argv: Sequence[str], pass_env: Sequence[str] = (), isolate: bool = True,
        hidden: Sequence[str | Path] = (),
    ) -> None:  # fmt: skip
        if not argv:
            raise ToolgymError("a harness command needs at least the program to run")
        self.argv, self.name = list(argv), " ".join(argv)
        self.pass_env = (*PASSED_ENV, *pass_env)
        self.prefix = isolation_prefix(hidden) if isolate else []

    def environment(self, task: HarnessTask, base_url: str, api_key: str) -> dict[str, str]:
        return {**passed_environment(self.pass_env), "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": api_key, "TOOLGYM_TASK": task.to_json()}  # fmt: skip

    async def run(self, task: HarnessTask, base_url: str, api_key: str) -> Any:
        process = await asyncio.create_subprocess_exec(
            *self.prefix, *self.argv, env=self.environment(task, base_url, api_key),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, limit=OUTPUT_LIMIT,
        )  # fmt: skip
        output = asyncio.gather(_bounded(process.stdout), _bounded(process.stderr))
        try:
            code = await _exit_code(process)
            _end_group(process.pid)  # what it left running ends with it
            try:
                (out, more), (err, _) = await asyncio.wait_for(
                    asyncio.shield(output), OUTPUT_GRACE_S
                )
            except TimeoutError:
                raise HarnessFailed(
                    "a process the command started kept its output open after it exited"
                ) from None
        finally:
            if process.returncode is None:  # cancelled (a timeout): stop the whole group
                _end_group(process.pid)
                await _exit_code(process)
            output.cancel()
            with contextlib.suppress(BaseException):
                await output  # retrieved, so its cancellation is not logged
        if code != 0:
            raise HarnessFailed(f"the command exited with {code}: {failure(err)}")
        if more:
            raise HarnessFailed(f"the command printed more than {OUTPUT_LIMIT} bytes")
        return out.decode(errors="replace").strip()


def isolation_prefix(hidden: Sequence[str | Path] = ()) -> list[str]:
    """bubblewrap's command line that runs an agent's process in PID and IPC namespaces of its
    own (the file system shared, but for an empty folder over each `hidden` one: the run's
    directory, whose stored episodes hold tasks' answers), ended with the trainer; a
    ConfigError where it is missing."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ConfigError(
            "harness commands run isolated from each other and the trainer with "
            "bubblewrap, which is not installed (Debian: apt-get install bubblewrap); "
            "or set harness.isolate: false to run them as the trainer's own processes"
        )
    covered = [arg for path in hidden if Path(path).is_dir()
               for arg in ("--tmpfs", str(Path(path).resolve()))]  # fmt: skip
    return [bwrap, "--dev-bind", "/", "/", *covered, "--proc", "/proc", "--unshare-pid",
            "--unshare-ipc", "--die-with-parent", "--new-session", "--"]  # fmt: skip


def passed_environment(names: Sequence[str]) -> dict[str, str]:
    """The trainer's variables `names` names, where set."""
    return {name: os.environ[name] for name in names if name in os.environ}


EXIT_POLL_S = 0.02
TAIL_LINES = 3
"""The lines of a failed command's standard error quoted after the exception it raised."""


def failure(stderr: bytes) -> str:
    """Why a command failed, in one bounded line: the exception its last Python traceback
    ended with, then the lines its standard error ended with after it (a framework often
    logs after the error that ended it: the last line alone can be a retry notice)."""
    lines = [line.rstrip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return "(nothing on its standard error)"
    at = _raised_at(lines)
    if at is None:
        return one_line(" | ".join(lines[-TAIL_LINES:]), 600)
    after = lines[at + 1 :][-TAIL_LINES:]
    then = f" (then: {one_line(' | '.join(after), 300)})" if after else ""
    return one_line(lines[at], 400) + then


def _raised_at(lines: list[str]) -> int | None:
    """Where the exception line of the last traceback in `lines` is (its first unindented
    line after the frames)."""
    starts = [k for k, line in enumerate(lines) if line.startswith("Traceback (most recent call")]
    if not starts:
        return None
    return next((k for k in range(starts[-1] + 1, len(lines)) if not lines[k][0].isspace()), None)


async def _exit_code(process: asyncio.subprocess.Process) -> int:
    """The exit code as soon as the process exits: asyncio's wait() (before Python 3.12)
    also waits for every pipe to close, which a child the command left running holds."""
    while process.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)
    return process.returncode


def _end_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _bounded(stream: asyncio.StreamReader | None) -> tuple[bytes, bool]:
    """A stream read to its end: the last OUTPUT_LIMIT bytes, and whether there were more."""
    kept, more = b"", False
    while stream is not None and (block := await stream.read(65536)):
        kept += block
        if len(kept) > OUTPUT_LIMIT:
            kept, more = kept[-OUTPUT_LIMIT:], True
    return kept, more
