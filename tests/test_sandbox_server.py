"""`toolgym serve sandbox` against SandboxFusion's own client (the `sandbox-fusion`
package) and hostile requests, on a real bubblewrap pool behind a real server on loopback."""

from __future__ import annotations

import base64
import concurrent.futures
import json

import pytest
import requests
import sandbox_fusion
from aiohttp import web
from sandbox_fusion import RunCodeRequest, RunStatus, summary_run_code_result
from sandbox_fusion.models import CommandRunStatus, SummaryMapping

from toolgym.sandbox import Limits, SandboxPool
from toolgym.sandbox.server import SandboxServer, ServerLimits


async def _serve(server: SandboxServer) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def url(loop_thread):
    pool = SandboxPool("bubblewrap", size=2, limits=Limits(timeout_s=5, memory_mb=256))
    server = SandboxServer(pool, ServerLimits(max_body_bytes=1 << 20, max_code_chars=50_000))
    runner, base = loop_thread.call(_serve(server))
    yield base
    loop_thread.call(runner.cleanup())


def run(url: str, **fields) -> sandbox_fusion.RunCodeResponse:
    return sandbox_fusion.run_code(RunCodeRequest(**fields), endpoint=url, max_attempts=1)


def test_sandboxfusion_client_success_and_failure(url):
    ok = run(url, code="print(input() * 2)", language="python", stdin="ab")
    assert ok.status == RunStatus.Success and ok.compile_result is None
    assert ok.run_result.status == CommandRunStatus.Finished
    assert (ok.run_result.return_code, ok.run_result.stdout) == (0, "abab\n")
    assert ok.run_result.execution_time >= 0
    assert summary_run_code_result(ok, SummaryMapping()) == RunStatus.Success

    failed = run(url, code="raise SystemExit(3)", language="python")
    assert failed.status == RunStatus.Failed and failed.run_result.return_code == 3
    assert summary_run_code_result(failed, SummaryMapping(RunFailed="wrong")) == "wrong"

    bash = run(url, code="echo $((6 * 7)); exit 0", language="bash")
    assert bash.run_result.stdout == "42\n"


def test_timeout_is_time_limit_exceeded(url):
    slow = run(url, code="while True: pass", language="python", run_timeout=1)
    assert slow.status == RunStatus.Failed
    assert slow.run_result.status == CommandRunStatus.TimeLimitExceeded
    assert summary_run_code_result(slow, SummaryMapping(RunTimeout="tle")) == "tle"


def test_files_in_and_out(url):
    data = base64.b64encode(b"3 4\n").decode()
    code = "a, b = map(int, open('data/in.txt').read().split())\nopen('out.txt', 'w').write(str(a * b))"
    result = run(url, code=code, language="python", files={"data/in.txt": data},
                 fetch_files=["out.txt", "missing.txt"])  # fmt: skip
    assert result.status == RunStatus.Success, result
    assert base64.b64decode(result.files["out.txt"]) == b"12"
    assert "missing.txt" not in result.files


def test_health_and_liveness(url):
    health = requests.get(f"{url}/health", timeout=10).json()
    assert health["status"] == "ok" and health["backend"] == "bubblewrap"
    assert requests.get(f"{url}/", timeout=10).text == "OK"


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ("not json", 400, "not valid JSON"),
        ("[1, 2]", 400, "JSON object"),
        ('{"language": "python"}', 400, "code"),
        ('{"code": "1", "language": "cpp"}', 400, "python, bash"),
        ('{"code": 1, "language": "python"}', 400, "code"),
        ('{"code": "1", "language": "python", "run_timeout": -1}', 400, "run_timeout"),
        ('{"code": "1", "language": "python", "run_timeout": "10"}', 400, "run_timeout"),
        ('{"code": "1", "language": "python", "memory_limit_MB": -7}', 400, "memory_limit_MB"),
        ('{"code": "1", "language": "python", "files": {"/etc/x": ""}}', 400, "relative path"),
        ('{"code": "1", "language": "python", "files": {"../x": ""}}', 400, "relative path"),
        ('{"code": "1", "language": "python", "fetch_files": ["/etc/shadow"]}', 400, "relative"),
        ('{"code": "1", "language": "python", "files": {"a": "***"}}', 400, "base64"),
        ('{"code": "1", "language": "python", "stdin": 5}', 400, "stdin"),
        (json.dumps({"code": "x" * 60_000, "language": "python"}), 413, "characters"),
        (json.dumps({"code": "x" * (2 << 20), "language": "python"}), 413, "Too Large"),
        ('{"code": "1", "language": "python", "n": 1' + "0" * 5000 + "}", 400, "not valid JSON"),
    ],
)
def test_bad_requests_get_a_clear_4xx(url, body, status, says):
    response = requests.post(f"{url}/run_code", data=body, timeout=30,
                             headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == status, response.text
    assert says in response.json()["error"]


def test_concurrent_clients_all_answered(url):
    codes = [f"print({i} * {i})" for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(12) as workers:
        results = list(workers.map(lambda c: run(url, code=c, language="python"), codes))
    assert [r.run_result.stdout for r in results] == [f"{i * i}\n" for i in range(24)]


def test_a_broken_sandbox_is_a_sandbox_error(loop_thread):
    """When no sandbox can start, the answer is SandboxError (infrastructure), never Failed."""
    from toolgym.sandbox.backends.bubblewrap import BubblewrapBackend

    backend = BubblewrapBackend()
    pool = SandboxPool(backend, size=0, health_interval_s=0)
    runner, base = loop_thread.call(_serve(SandboxServer(pool)))
    try:
        backend.python = "/nonexistent/python3"  # the runtime vanished after start
        response = requests.post(f"{base}/run_code", json={"code": "1", "language": "python"},
                                 timeout=60).json()  # fmt: skip
        assert response["status"] == "SandboxError" and response["run_result"] is None
        assert response["message"]
    finally:
        loop_thread.call(runner.cleanup())
