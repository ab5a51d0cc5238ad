"""`toolgym serve sandbox`: a warm sandbox pool behind SandboxFusion's HTTP contract, so
trainers and evaluators written for SandboxFusion run their code here unchanged.

    POST /run_code {"code", "language", "stdin", "run_timeout", "compile_timeout",
                    "memory_limit_MB", "files": {path: base64}, "fetch_files": [path]}
      -> {"status": "Success" | "Failed" | "SandboxError", "message",
          "compile_result": null,
          "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error",
                         "execution_time", "return_code", "stdout", "stderr"},
          "executor_pod_name": null, "files": {path: base64}}
    GET  /health -> {"status": "ok" | "unhealthy", ...the pool's state}
    GET  /       -> "OK" (the liveness probe SandboxFusion's clients send)

As in SandboxFusion, the code's own failure is "Failed" and a failure of the sandbox itself
is "SandboxError" (HTTP 200 both); fields toolgym does not use (`args`, `compile_timeout`)
are accepted and ignored. A malformed request is a 400 that says what to change.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from toolgym.errors import ConfigError
from toolgym.http import BadRequest, error_middleware, explain, read_json
from toolgym.sandbox.pool import SandboxPool
from toolgym.sandbox.result import LANGUAGES, RunResult, SandboxError, Status, check_file_name


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 32 << 20
    max_code_chars: int = 1 << 20
    max_files: int = 64
    max_pending: int = 1024
    """Requests waiting for a sandbox at once; more are answered 503 at once."""


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    code: StrictStr
    language: StrictStr
    stdin: StrictStr | None = None
    run_timeout: StrictInt | StrictFloat = Field(default=10, gt=0, allow_inf_nan=False)
    compile_timeout: StrictInt | StrictFloat = Field(default=10, ge=0, allow_inf_nan=False)
    memory_limit_MB: StrictInt = Field(default=-1, ge=-1, le=1 << 20)
    files: dict[StrictStr, StrictStr | None] = Field(default_factory=dict)
    fetch_files: list[StrictStr] = Field(default_factory=list)


class SandboxServer:
    def __init__(self, pool: SandboxPool, limits: ServerLimits | None = None) -> None:
        self.pool = pool
        self.limits = limits or ServerLimits()
        self.pending = 0

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[error_middleware("the sandbox server failed")],
            client_max_size=self.limits.max_body_bytes,
        )
        app.router.add_post("/run_code", self.run_code)
        app.router.add_get("/health", self.health)
        app.router.add_get("/", self.alive)
        app.on_startup.append(self._start)
        app.on_cleanup.append(lambda _: self.pool.aclose())
        return app

    async def _start(self, app: web.Application) -> None:
        await self.pool.start()

    async def alive(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def health(self, request: web.Request) -> web.Response:
        state = await self.pool.health()
        state["pending"] = self.pending
        return web.json_response({"status": "ok" if state["ok"] else "unhealthy", **state})

    async def run_code(self, request: web.Request) -> web.Response:
        body = self._validate(await read_json(request))
        if self.pending >= self.limits.max_pending:
            raise BadRequest(
                f"{self.pending} requests are already waiting for a sandbox; retry later", 503
            )
        files = {name: data for name, data in body.files.items() if data is not None}
        memory = None if body.memory_limit_MB <= 0 else body.memory_limit_MB
        self.pending += 1
        try:
            result = await self.pool.run(
                body.code,
                body.language,
                stdin=body.stdin or "",
                files={name: base64.b64decode(data) for name, data in files.items()},
                fetch_files=body.fetch_files,
                timeout_s=float(body.run_timeout),
                memory_mb=memory,
            )
        except SandboxError as exc:
            return web.json_response(sandbox_error(str(exc)))
        finally:
            self.pending -= 1
        return web.json_response(to_sandboxfusion(result))

    def _validate(self, data: Any) -> RunCodeRequest:
        if not isinstance(data, dict):
            raise BadRequest("the request body must be a JSON object")
        try:
            body = RunCodeRequest.model_validate(data)
        except ValidationError as exc:
            raise BadRequest(explain(exc)) from None
        if body.language not in LANGUAGES:
            raise BadRequest(
                f"language: {body.language!r} is not served here; choose one of "
                f"{', '.join(LANGUAGES)}"
            )
        if len(body.code) > self.limits.max_code_chars:
            raise BadRequest(
                f"code: {len(body.code)} characters; at most {self.limits.max_code_chars}", 413
            )
        if len(body.files) > self.limits.max_files or len(body.fetch_files) > self.limits.max_files:
            raise BadRequest(f"files, fetch_files: at most {self.limits.max_files} each")
        for name in [*body.files, *body.fetch_files]:
            try:
                check_file_name(name)
            except ConfigError as exc:
                raise BadRequest(str(exc)) from None
        for name, data in body.files.items():
            if data is not None:
                try:
                    base64.b64decode(data, validate=True)
                except (binascii.Error, ValueError):
                    raise BadRequest(f"files.{name}: not valid base64") from None
        return body


def to_sandboxfusion(result: RunResult) -> dict[str, Any]:
    """A RunResult in SandboxFusion's response shape."""
    run_status = "TimeLimitExceeded" if result.status is Status.TIMEOUT else "Finished"
    return {
        "status": "Success" if result.status is Status.OK else "Failed",
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": run_status,
            "execution_time": round(result.duration_s, 6),
            # SandboxFusion's clients need a code: -1 when the process left none
            "return_code": -1 if result.exit_code is None else result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
        },
        "executor_pod_name": None,
        "files": {
            name: base64.b64encode(data).decode()
            for name, data in result.files.items()
            if data is not None
        },
    }


def sandbox_error(message: str) -> dict[str, Any]:
    return {
        "status": "SandboxError",
        "message": message,
        "compile_result": None,
        "run_result": None,
        "executor_pod_name": None,
        "files": {},
    }
