"""What toolgym's HTTP servers share: reading a JSON body that may be hostile, and turning
every failure into a JSON error with the right status, never a traceback or an HTML page."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError


class BadRequest(Exception):
    """The client's mistake: answered with `status` and {"error": message}."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def read_json(request: web.Request) -> Any:
    """The request body as JSON, or BadRequest saying why it cannot be read."""
    try:
        data = json.loads(await request.text())
    except ValueError as exc:  # invalid JSON, bad UTF-8, or an integer too long to read
        raise BadRequest(
            f"the request body is not valid JSON: {str(exc).split(';')[0][:200]}"
        ) from None
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(
            "the request holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
        ) from None
    return data


def explain(exc: ValidationError) -> str:
    """The first validation error as "field.path: message"."""
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_middleware(failure: str) -> Any:
    """Bad requests get their 4xx; an unexpected failure a 500 whose error starts `failure`."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=exc.status)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return web.json_response(
                {"error": f"{request.method} {request.path}: {exc.reason}"}, status=exc.status
            )
        except asyncio.CancelledError:
            raise  # the client went away
        except Exception as exc:
            return web.json_response(
                {"error": f"{failure}: {type(exc).__name__}: {exc}"}, status=500
            )

    return errors


def serve(app: web.Application, host: str, port: int, announce: Callable[..., None] | None) -> None:
    """Run `app` until interrupted, logging one line per request (client, request line,
    status, bytes, seconds) to the `toolgym.serve` logger, which `--log-level` governs; a
    client that disconnects cancels its handler (its queued work is dropped). An address it
    cannot listen on is a one-line ConfigError."""
    from toolgym.errors import ConfigError
    from toolgym.log import get_logger

    try:
        web.run_app(
            app, host=host, port=port, print=announce, handler_cancellation=True,
            access_log=get_logger("toolgym.serve"), access_log_format='%a "%r" %s %b bytes %Tf s',
        )  # fmt: skip
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
