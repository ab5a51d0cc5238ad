"""Shared test set-up: fixture modules importable, helpers to run the CLI as a user would."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from warm_cli import WarmCli

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))

# Each of N workers (pytest-xdist) and the processes it starts get 1/N of the cores for
# torch's and OpenMP's thread pools: left to themselves each takes every core, and two
# workers' pools spinning on two cores made a pretraining run three times slower.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # before anything here imports torch
    share = len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, share)))

# TextWorld games are generated into a cache that lives for this session only (and is shared
# by its CLI runs): no test finds games that an earlier session or the user made.
os.environ["TOOLGYM_TEXTWORLD_CACHE"] = tempfile.mkdtemp(prefix="toolgym-tw-cache-")
atexit.register(shutil.rmtree, os.environ["TOOLGYM_TEXTWORLD_CACHE"], True)


WORKER_GROUPS = {"quickstart_run": "quickstart", "pretrained_base": "pretrained-base"}
"""Tests on each slow shared model (by fixture) run on one worker: as a unit of several tests
they are handed out first, so the two models are built at once on two workers, instead of one
worker waiting minutes on the other's lock."""
MODULE_GROUPS = {
    # `ray stop --force` stops every cluster on the machine: one Ray test at a time, and
    # beside the quickstart's tests, which they train from
    "test_ray_engines": "quickstart", "test_ray_envs": "quickstart", "test_ray_resume": "quickstart",
    # vLLM's CPU engine binds its worker to a core: one engine at a time
    "test_vllm_engine": "vllm", "test_vllm_training": "vllm", "test_vllm_server": "vllm",
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist names each test by its group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = MODULE_GROUPS.get(item.module.__name__ if item.module else "")
        for fixture, name in WORKER_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                group = name
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


WARM = WarmCli()
"""Forks CLI runs from a process that has imported torch and transformers (warm_cli.py)."""
atexit.register(WARM.close)


def run_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `toolgym ARGS` in a process of its own (as a user would), capturing its output:
    forked warm (warm_cli.py) unless `env` changes what the preloaded libraries read."""
    full_env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(FIXTURES), **(env or {})}
    if WARM.usable(full_env):
        return WARM.run(list(args), full_env, ROOT, stdin, timeout)
    return subprocess.run(
        [sys.executable, "-m", "toolgym", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def cli():
    return run_cli


def run_ok(*args: str, timeout: float = 900) -> str:
    """`toolgym ARGS` that must succeed (the recipe tests' steps); its stdout."""
    result = run_cli(*args, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `name`, built by `build` once per test session: with several workers
    (pytest-xdist) the first to need it builds it under a lock, in the folder all of them
    share, and the others wait for it and reuse it (a pretraining run is minutes of CPU)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder, built = base / name, base / f"{name}.built"
    with FileLock(str(base / f"{name}.lock")):
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            built.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny qwen2-architecture model with a locally trained tokenizer (built once)."""
    from toolgym.agents.models.fresh import init_model

    return built_once(
        tmp_path_factory, "tiny-model", lambda out: init_model(out, "qwen2", "tiny", seed=0)
    )


@pytest.fixture(scope="session")
def mini_model_dir(tmp_path_factory):
    """The `mini` model: the smallest size whose attention heads vLLM's CPU build runs."""
    from toolgym.agents.models.fresh import init_model

    return built_once(
        tmp_path_factory, "mini-model", lambda out: init_model(out, "qwen2", "mini", seed=0)
    )


@pytest.fixture(scope="session")
def pretrained_base(tmp_path_factory):
    """A tiny base pretrained on half the default schedule (700 steps, 300 of them the copy
    warm-up: about four minutes), with the probes test_pretrain.py checks; the MCP and
    verifiers tests train on it. Half, because the copy circuit has formed by then and the
    suite's time is spent once per session on this fixture."""

    def pretrain(folder: Path) -> None:
        run_ok("model", "pretrain", "--out", str(folder / "pt_tiny"), "--size", "tiny",
               "--steps", "700", "--copy-warmup-steps", "300", "--probes", "100",
               timeout=1800)  # fmt: skip

    return built_once(tmp_path_factory, "pretrained-base", pretrain) / "pt_tiny"


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`toolgym quickstart` as the README runs it (3 to 5 minutes): its output directory
    (base, sft, rl, results.json) and the finished process."""
    import json

    def quickstart(out: Path) -> None:
        done = run_cli("quickstart", "--out", str(out), timeout=1500)
        (out / "process.json").write_text(json.dumps(
            {"args": done.args, "returncode": done.returncode, "stdout": done.stdout,
             "stderr": done.stderr}
        ))  # fmt: skip

    out = built_once(tmp_path_factory, "quickstart", quickstart)
    return out, subprocess.CompletedProcess(**json.loads((out / "process.json").read_text()))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


CHAT_MESSAGES = [
    {"role": "system", "content": "You are in a maze."},
    {"role": "user", "content": "Go north."},
]
CHAT_TOOL_CALL = '<tool_call>{"name": "move", "arguments": {"direction": "north"}}</tool_call>'


@pytest.fixture(scope="session")
def tool_calling_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model taught, by a few hundred optimizer steps on one conversation, to answer
    CHAT_MESSAGES (with the Maze tools) with CHAT_TOOL_CALL: a real model that calls tools."""

    return built_once(
        tmp_path_factory, "tool-calling-model", lambda out: teach_tool_call(tiny_model_dir, out)
    )


def teach_tool_call(model_dir: Path, out: Path) -> Path:
    """The model at `model_dir` taught to answer CHAT_MESSAGES (with the Maze tools) with
    CHAT_TOOL_CALL, saved to `out`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolgym.agents.render import ChatRenderer
    from toolgym.envs.maze import MazeEnv

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    renderer = ChatRenderer(tokenizer)
    prompt = renderer.prompt_ids(CHAT_MESSAGES, MazeEnv().tool_schemas())
    answer = renderer.encode(CHAT_TOOL_CALL) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    return teach(model, tokenizer, [(prompt, answer)], out, steps=300)


def teach(model, tokenizer, examples, out: Path, steps: int) -> Path:
    """Train `model` on (prompt ids, answer ids) examples (the mean loss over the answers)
    for at most `steps` steps, stopping once it is below 0.01; save it with `tokenizer`."""
    import torch

    rows = [
        (torch.tensor([prompt + answer]), torch.tensor([[-100] * len(prompt) + answer]))
        for prompt, answer in examples
    ]
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = sum(model(input_ids=ids, labels=labels).loss for ids, labels in rows) / len(rows)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def static_site(directory: Path, probe: str) -> Iterator[str]:
    """Serve `directory` over HTTP on loopback (Python's own http.server, in its own process)
    until `probe` answers; yield the base URL, stop it afterwards."""
    import time
    import urllib.request

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + probe, timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)


PROCESSES: dict[str, subprocess.Popen[str]] = {}
"""The process behind each URL `serve` yields (tests read its memory)."""


def wait_until_answers(url: str, process: subprocess.Popen[Any], within_s: float = 120) -> None:
    """Poll `url` until it answers 200; fail if `process` exits or time runs out first."""
    import time
    import urllib.request

    deadline = time.monotonic() + within_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            assert process.poll() is None, f"the server behind {url} exited"
            assert time.monotonic() < deadline, f"{url} did not answer within {within_s:g} s"
            time.sleep(0.2)


def listening_pids(port: int) -> set[int]:
    """The processes holding a listening TCP socket on loopback `port` (Linux's /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                    inodes.add(fields[9])
    holders = set()
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes:
                holders.add(int(fd.parts[2]))
    return holders


def serve(args: list[str], what: str) -> Iterator[str]:
    """Run `toolgym ARGS --port P` as a real process on loopback until /health answers; yield
    its base URL, stop it afterwards. Its output goes to a file (a pipe nobody reads would
    fill and stall a server that logs). A free port can be taken by another worker's server
    before this one binds it, and that server would then answer /health: the port must be
    held by this process, else it starts again on another."""
    for _ in range(5):
        process, url, output = _start(args, what)
        if process.pid in listening_pids(int(url.rpartition(":")[2])):
            break
        process.kill()
        process.wait()
        output.close()
    else:
        raise RuntimeError(f"the {what} never held the port it was given")
    PROCESSES[url] = process
    try:
        yield url
    finally:  # also when a test closes the generator itself (GeneratorExit at the yield)
        PROCESSES.pop(url, None)
        output.close()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _start(args: list[str], what: str) -> tuple[subprocess.Popen[str], str, Any]:
    """`toolgym ARGS --port P` on a free port, once something answers its /health."""
    import time
    import urllib.request

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
    output = tempfile.TemporaryFile("w+")  # noqa: SIM115  (closed after the server stops)
    process = subprocess.Popen(
        [sys.executable, "-m", "toolgym", *args, "--port", str(port)],
        env=env, stdout=output, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return process, url, output
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output.seek(0)
                raise RuntimeError(f"the {what} did not start:\n{output.read()}") from None
            time.sleep(0.2)


@pytest.fixture(scope="session")
def model_server(tool_calling_model_dir):
    """`toolgym serve model` as a real process on loopback; yields its base URL."""
    yield from serve(
        ["serve", "model", str(tool_calling_model_dir), "--served-model-name", "tiny"],
        "model server",
    )


@pytest.fixture(scope="session")
def world_corpus(tmp_path_factory):
    """The small synthetic world's documents as a Search-R1 JSONL corpus."""
    from toolgym.envs.search.world import World
    from toolgym.tools.search.corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("world") / "corpus.jsonl", World(0).documents())


@pytest.fixture(scope="session")
def world_bm25_index(world_corpus, tmp_path_factory):
    """A bm25 index of the small world, built with the CLI as a user would."""
    out = tmp_path_factory.mktemp("index") / "bm25"
    result = run_cli(
        "index", "build", "--corpus", str(world_corpus), "--kind", "bm25", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def search_server(world_bm25_index):
    """`toolgym serve search` over the small world's bm25 index, on loopback."""
    yield from serve(["serve", "search", "--index", str(world_bm25_index)], "search server")


class LoopThread:
    """An event loop in a thread, so sync tests can share async resources (a sandbox pool)
    across tests: `loop.call(coro)` runs a coroutine there and returns its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def serve_app(app: Any, ws_max_size: int = 8 << 20) -> Iterator[str]:
    """Run an ASGI app with uvicorn on loopback, in a thread of this process (so a test can
    look at the app's own state), until it stops; yield its base URL."""
    import time

    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            ws_max_size=ws_max_size)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on loopback with the generated databases loaded."""
    import shutil
    import tempfile

    from toolgym.envs.sql.generate import build, default_db_ids
    from toolgym.envs.sql.postgres_server import start_postgres

    # not under pytest's own temp folder: as root the server runs as another user, who cannot
    # pass through that folder
    folder = tempfile.mkdtemp(prefix="toolgym-postgres-")
    server = start_postgres(folder, free_port())
    try:
        server.load([build(db_id) for db_id in default_db_ids()])
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
