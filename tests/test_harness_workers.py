"""Long-lived agent workers (agents/gateway/worker.py): the example agent's worker serves many
episodes per process through the gateway, and a worker that crashes, breaks the line
protocol or reports an error fails only its own episode (judged as a failed command is),
a fresh worker serving the next."""

from __future__ import annotations

import sys

from conftest import ROOT
from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.gateway.collector import HarnessCollector, HarnessLimits
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.gateway.teacher import FunctionReplies, Teacher
from toolgym.agents.gateway.worker import WorkerHarness
from toolgym.agents.models.loading import load_tokenizer
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.envs.ref import EnvRef
from toolgym.imports import load_callable

WORKER = [sys.executable, str(ROOT / "examples" / "agents" / "arithmetic_worker.py")]
TEACHER = f"{ROOT / 'examples' / 'agents' / 'arithmetic_teacher.py'}:reply"
ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", {"n_operands": 2})

# a worker that serves its first episode, then (on its second) calls the model and dies
DIES_ON_SECOND = """import json, sys, openai
for n, line in enumerate(sys.stdin):
    request = json.loads(line)
    client = openai.OpenAI(base_url=request["base_url"], api_key=request["api_key"])
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    if n == 1:
        raise SystemExit("out of memory, say")
    print(json.dumps({"result": "nope"}), flush=True)
"""
PRINTS_NOISE = "import sys\nfor line in sys.stdin:\n    print('loading...', flush=True)\n"
REPORTS_ERROR = (
    "import json, sys\nfor line in sys.stdin:\n"
    "    print(json.dumps({'error': 'no GPU here'}), flush=True)\n"
)

# a worker that opens a client per episode and never closes it: its connections stay open
LEAKS_CLIENTS = """import json, sys, openai
kept = []
for line in sys.stdin:
    request = json.loads(line)
    kept.append(openai.OpenAI(base_url=request["base_url"], api_key=request["api_key"],
                              max_retries=0))
    try:
        kept[-1].chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        print(json.dumps({"result": "1"}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
"""


def play(tiny_model_dir, harness, episodes: int, concurrency: int = 2, connections: int = 512):
    tokenizer = load_tokenizer(tiny_model_dir)
    renderer = ChatRenderer(tokenizer)
    runtime = Runtime()

    async def run():
        teacher = Teacher(FunctionReplies(load_callable(TEACHER, "teacher"), "teacher"),
                          renderer, tokenizer)  # fmt: skip
        gateway = Gateway(teacher, renderer, tokenizer)
        gateway.admission.limit = connections
        await gateway.start()
        pool = runtime.pool_for(ARITHMETIC)
        env = await pool.acquire()
        draws = env.unwrapped.task_source().head("train", episodes)
        pool.release(env)
        collector = HarnessCollector(
            gateway, harness, result_check("env"), SessionSettings(SamplingParams(max_tokens=64)),
            runtime.pool_for, HarnessLimits(concurrency=concurrency),
        )  # fmt: skip
        try:
            groups = await collector.collect([GroupRequest(ARITHMETIC, d, 1) for d in draws])
        finally:
            await harness.aclose()
            await gateway.aclose()
        return [t for g in groups for t in g.trajectories]

    try:
        return runtime.run(run())
    finally:
        runtime.close()


def test_two_workers_serve_six_episodes(tiny_model_dir):
    harness = WorkerHarness(WORKER, workers=2)
    episodes = play(tiny_model_dir, harness, 6)
    assert all(t.success for t in episodes), [(t.infra_error, t.verdict) for t in episodes]
    assert harness.started == 2  # one process each, six episodes


def test_a_worker_that_dies_fails_its_own_episode_only(tiny_model_dir, tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(DIES_ON_SECOND)
    harness = WorkerHarness([sys.executable, str(script)], workers=1)
    first, second, third = play(tiny_model_dir, harness, 3, concurrency=1)
    assert not first.masked and first.answer == "nope"
    # it died after the policy replied: the policy's 0, with the worker's own last words
    assert not second.masked and second.total_reward == 0.0
    assert "exited with 1" in second.steps[-1].error and "out of memory" in second.steps[-1].error
    assert not third.masked and third.answer == "nope" and harness.started == 2


def test_a_worker_that_breaks_the_protocol_or_reports_an_error_masks_in_words(
    tiny_model_dir, tmp_path
):
    for source, said in [(PRINTS_NOISE, "broke the line protocol: it printed 'loading...\\n'"),
                         (REPORTS_ERROR, "the worker reported: no GPU here")]:  # fmt: skip
        script = tmp_path / "worker.py"
        script.write_text(source)
        harness = WorkerHarness([sys.executable, str(script)], workers=1)
        episodes = play(tiny_model_dir, harness, 2, concurrency=1)
        for t in episodes:  # before any model call: it could not be run, not the policy's doing
            assert t.masked and said in t.infra_error, t.infra_error
        assert harness.started == (2 if source is PRINTS_NOISE else 1)


def test_a_worker_that_leaves_its_clients_open_is_told_so_when_the_gateway_refuses_it(
    tiny_model_dir, tmp_path
):
    script = tmp_path / "leaks.py"
    script.write_text(LEAKS_CLIENTS)
    harness = WorkerHarness([sys.executable, str(script)], workers=1)
    episodes = play(tiny_model_dir, harness, 5, concurrency=1, connections=3)
    assert [t.masked for t in episodes] == [False] * 3 + [True] * 2
    for t in episodes[3:]:  # the fourth connection on is refused: the reason says why
        assert "APIConnectionError" in t.infra_error, t.infra_error
        assert "the gateway refused 1 connection meanwhile, at its cap of 3" in t.infra_error
        assert "must close it" in t.infra_error
