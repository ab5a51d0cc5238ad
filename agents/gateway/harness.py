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
import signal
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from toolgym.errors import ToolgymError, one_line
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
    data: dict[str, Any] | None
    """The task as the env was reset with it. It may hold the answer: build the model's
    prompt from `prompt`."""
    seed: int | None

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


class CommandHarness:
    """A command line run once per episode in its own process group (stopped whole on a
    timeout); its standard output, stripped, is the result."""

    def __init__(self, argv: Sequence[str]) -> None:
        if not argv:
            raise ToolgymError("a harness command needs at least the program to run")
        self.argv, self.name = list(argv), " ".join(argv)

    async def run(self, task: HarnessTask, base_url: str, api_key: str) -> Any:
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": api_key,
               "TOOLGYM_TASK": task.to_json()}  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *self.argv, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, limit=OUTPUT_LIMIT,
        )  # fmt: skip
        try:
            (out, more), (err, _) = await asyncio.gather(
                _bounded(process.stdout), _bounded(process.stderr)
            )
            code = await process.wait()
        finally:
            if process.returncode is None:  # cancelled (a timeout): stop the whole group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        if code != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            raise HarnessFailed(
                f"the command exited with {code}: {one_line(lines[-1] if lines else '')}"
            )
        if more:
            raise HarnessFailed(f"the command printed more than {OUTPUT_LIMIT} bytes")
        return out.decode(errors="replace").strip()


async def _bounded(stream: asyncio.StreamReader | None) -> tuple[bytes, bool]:
    """A stream read to its end: the last OUTPUT_LIMIT bytes, and whether there were more."""
    kept, more = b"", False
    while stream is not None and (block := await stream.read(65536)):
        kept += block
        if len(kept) > OUTPUT_LIMIT:
            kept, more = kept[-OUTPUT_LIMIT:], True
    return kept, more
