"""The viewer's HTTP server (aiohttp, as toolgym's other servers): the page and its two
assets, shipped in the package, and a JSON API over the runs it was given (runs.py). It
binds to 127.0.0.1 unless told otherwise, answers only requests addressed to the host it
serves (a page elsewhere cannot reach it by renaming a host), takes no path from a client,
and forbids the page any script or connection but its own."""

from __future__ import annotations

import asyncio
import json
import math
from importlib import resources
from typing import Any

from aiohttp import web

from toolgym.http import BadRequest, Handler, error_middleware
from toolgym.training.run.step_figures import step_figures
from toolgym.viewer import episodes
from toolgym.viewer.runs import LOOPBACK_HOSTS, NotFound, Run

ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
"""The files under /static/, by name: no other name is served."""
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def asset(name: str) -> bytes:
    return resources.files("toolgym.viewer").joinpath("static", name).read_bytes()


def build_app(runs: list[Run], host: str) -> web.Application:
    app = web.Application(middlewares=[guard(host), error_middleware("the viewer failed")])
    page = asset("index.html")

    async def index(request: web.Request) -> web.Response:
        return web.Response(body=page, content_type="text/html", charset="utf-8")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise NotFound(f"no asset {name!r}")
        return web.Response(body=asset(name), content_type=ASSETS[name], charset="utf-8")

    def run_of(request: web.Request) -> Run:
        number = int(request.match_info["run"])
        if not 0 <= number < len(runs):
            raise NotFound(f"run {number} is not served (runs 0..{len(runs) - 1})")
        return runs[number]

    async def listing(request: web.Request) -> web.Response:
        return answer(await asyncio.to_thread(lambda: [describe(k, r) for k, r in enumerate(runs)]))

    async def records(request: web.Request) -> web.Response:
        since = integer(request, "since", -1)
        return answer(await asyncio.to_thread(run_of(request).records, since))

    async def log(request: web.Request) -> web.Response:
        return answer(await asyncio.to_thread(run_of(request).log_tail))

    async def step(request: web.Request) -> web.Response:
        run, number = run_of(request), int(request.match_info["step"])
        filters = read_filters(request)
        offset, limit = integer(request, "offset", 0), integer(request, "limit", 50)

        def listed() -> dict[str, Any]:
            kept = run.step_file(number)
            record = next((r for r in run.records() if r["step"] == number), None)
            return episodes.page(kept.trajectories, filters, offset, limit) | {
                "skipped": kept.skipped,
                "figures": step_figures(record),
                "played": (record or {}).get("rollout/episodes"),
            }

        return answer(await asyncio.to_thread(listed))

    async def episode(request: web.Request) -> web.Response:
        run, number = run_of(request), int(request.match_info["step"])
        index = int(request.match_info["index"])
        return answer(await asyncio.to_thread(episodes.episode, run, number, index))

    async def item(request: web.Request) -> web.Response:
        run, key = run_of(request), request.match_info["item"]
        return answer(await asyncio.to_thread(episodes.across_steps, run, key))

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "runs": len(runs)})

    app.router.add_get("/health", health)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/runs", listing)
    app.router.add_get(r"/api/runs/{run:\d{1,6}}/records", records)
    app.router.add_get(r"/api/runs/{run:\d{1,6}}/log", log)
    app.router.add_get(r"/api/runs/{run:\d{1,6}}/steps/{step:\d{1,9}}", step)
    app.router.add_get(
        r"/api/runs/{run:\d{1,6}}/steps/{step:\d{1,9}}/episodes/{index:\d{1,9}}", episode
    )
    app.router.add_get(r"/api/runs/{run:\d{1,6}}/items/{item:[0-9a-f]{1,128}}", item)
    return app


def answer(data: Any) -> web.Response:
    """`data` as JSON a browser parses: a NaN or an infinity (a metric of a diverged run, a
    damaged line) is null, never the bare NaN that would fail the page's every curve."""
    return web.json_response(finite(data), dumps=lambda v: json.dumps(v, allow_nan=False))


def finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    return value


def describe(number: int, run: Run) -> dict[str, Any]:
    config = run.config()
    return {
        "number": number, "name": run.name, "path": str(run.path), "config": config,
        "summary": run.summary(), "steps": run.steps(),
    }  # fmt: skip


def integer(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {raw[:40]!r}") from None


def flag(request: web.Request, name: str) -> bool | None:
    raw = request.query.get(name, "")
    if raw in ("", "any"):
        return None
    if raw not in ("yes", "no"):
        raise BadRequest(f"{name} is yes, no or any, not {raw[:40]!r}")
    return raw == "yes"


def number(request: web.Request, name: str) -> float | None:
    raw = request.query.get(name, "")
    if raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, not {raw[:40]!r}") from None


def read_filters(request: web.Request) -> episodes.Filters:
    q = request.query
    return episodes.Filters(
        env=q.get("env") or None, role=q.get("role") or None, success=flag(request, "success"),
        masked=flag(request, "masked"), min_return=number(request, "min"),
        max_return=number(request, "max"), text=q.get("q", "")[:200],
    )  # fmt: skip


def guard(host: str) -> Any:
    """Answer only requests addressed to the served host (on loopback: a loopback name);
    every answer carries the page's content policy."""
    allowed = set(LOOPBACK_HOSTS) if host in LOOPBACK_HOSTS else {host}

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        named = request.url.host or ""
        if named not in allowed and host not in ("0.0.0.0", "::"):
            error = {"error": f"this viewer answers requests for {host}, not {named[:60]!r}"}
            return web.json_response(error, status=403)
        response = await handler(request)
        response.headers["Content-Security-Policy"] = POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    return check
