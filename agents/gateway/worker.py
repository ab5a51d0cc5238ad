"""An agent as a long-lived worker: one process serves many episodes, one at a time, so its
start (an interpreter, a framework's imports) is paid once per worker, not per episode.

The line protocol, over the worker's standard input and output:
- toolgym writes one line per episode: `{"task": {...}, "base_url": "...", "api_key": "..."}`
  (the task as a command's TOOLGYM_TASK holds it; the URL and key are that episode's
  session's, good only while it is open);
- the worker answers with one line: `{"result": ...}` (any JSON), or `{"error": "why"}` when
  it failed (then judged as a failed command is: masked before its first model call, the
  policy's 0 after);
- the worker exits when its standard input closes (the trainer is done, or died).
Anything else it prints on its standard output breaks the protocol: that worker is stopped
(its episode failed as a crash would) and a fresh one serves the next. Its standard error is
kept, the last of it quoted when it fails.

Up to `workers` processes run at once, each started when first needed. Each gets the
environment a command gets (PASSED_ENV and `pass_env`, never the trainer's keys) and, with
`isolate`, namespaces of its own (bubblewrap), as a command does. A worker serves one episode
at a time, so one episode's key is never in it while another's session is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolgym.agents.gateway.harness import (
    OUTPUT_LIMIT,
    PASSED_ENV,
    HarnessFailed,
    HarnessTask,
    failure,
    isolation_prefix,
    passed_environment,
)
from toolgym.errors import ToolgymError

STDERR_KEPT = 64 << 10
"""The bytes of a worker's standard error kept to quote when it fails."""
STOP_GRACE_S = 2.0


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr: deque[bytes] = deque()
        self.stderr_bytes = 0
        self.reader = asyncio.ensure_future(self._keep_stderr())

    async def _keep_stderr(self) -> None:
        """Drain the worker's standard error (a full pipe would stall it), keeping its end."""
        assert self.process.stderr is not None
        while block := await self.process.stderr.read(65536):
            self.stderr.append(block)
            self.stderr_bytes += len(block)
            while self.stderr_bytes > STDERR_KEPT and len(self.stderr) > 1:
                self.stderr_bytes -= len(self.stderr.popleft())

    def why(self) -> str:
        return failure(b"".join(self.stderr))

    async def stop(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.process.wait(), STOP_GRACE_S)
        self.reader.cancel()
        with contextlib.suppress(BaseException):
            await self.reader


class WorkerHarness:
    """A command started once per worker slot that serves episodes by the line protocol."""

    def __init__(
        self, argv: Sequence[str], pass_env: Sequence[str] = (), isolate: bool = True,
        workers: int = 8, hidden: Sequence[str | Path] = (),
    ) -> None:  # fmt: skip
        if not argv:
            raise ToolgymError("a harness worker needs at least the program to run")
        self.argv, self.name = list(argv), f"worker: {' '.join(argv)}"
        self.pass_env = (*PASSED_ENV, *pass_env)
        self.prefix = isolation_prefix(hidden) if isolate else []
        self.slots = asyncio.Semaphore(workers)
        self.idle: list[_Worker] = []
        self.started = 0
        """Workers started so far (a fresh one replaces each that failed)."""

    async def run(self, task: HarnessTask, base_url: str, api_key: str) -> Any:
        async with self.slots:
            worker = self.idle.pop() if self.idle else await self._start()
            kept = False
            try:
                answer = await self._ask(worker, task, base_url, api_key)
                kept = True
            finally:
                if kept:
                    self.idle.append(worker)
                else:  # it failed, or its episode was stopped mid-answer: it cannot be reused
                    await worker.stop()
        if "error" in answer:
            raise HarnessFailed(f"the worker reported: {str(answer['error'])[:600]}")
        return answer["result"]

    async def aclose(self) -> None:
        """Close each idle worker's input (its signal to exit), then stop it."""
        while self.idle:
            worker = self.idle.pop()
            if worker.process.stdin is not None:
                worker.process.stdin.close()
            await worker.stop()

    async def _start(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            *self.prefix, *self.argv, env=passed_environment(self.pass_env),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, limit=OUTPUT_LIMIT,
        )  # fmt: skip
        self.started += 1
        return _Worker(process)

    async def _ask(
        self, worker: _Worker, task: HarnessTask, base_url: str, api_key: str
    ) -> dict[str, Any]:
        process = worker.process
        assert process.stdin is not None and process.stdout is not None
        request = {"task": json.loads(task.to_json()), "base_url": base_url, "api_key": api_key}
        try:
            process.stdin.write(json.dumps(request, ensure_ascii=False).encode() + b"\n")
            await process.stdin.drain()
            line = await process.stdout.readline()
        except (ConnectionError, ValueError) as exc:  # its input closed; a line past the limit
            raise HarnessFailed(f"the worker broke the line protocol: {exc}") from None
        if not line.endswith(b"\n"):  # it exited mid-episode
            code = await process.wait()
            with contextlib.suppress(BaseException):  # its last standard error in
                await asyncio.wait_for(asyncio.shield(worker.reader), STOP_GRACE_S)
            raise HarnessFailed(f"the worker exited with {code}: {worker.why()}")
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not ({"result", "error"} & answer.keys()):
            raise HarnessFailed(
                "the worker broke the line protocol: it printed "
                f"{line[:200].decode(errors='replace')!r}, not one JSON object with `result` "
                "or `error`"
            )
        return answer
