"""Agent harnesses played through the gateway on loopback: the example agent on the plain
`openai` client trains a run end to end; a crashed, hung or abandoned agent masks only its
own episode; a command line is a harness too; a spent budget is the policy's doing (a 0, not
a mask)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from conftest import run_cli
from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.gateway.collector import HarnessCollector, HarnessLimits
from toolgym.agents.gateway.harness import CallableHarness, CommandHarness, HarnessTask
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import EpisodeEnd, TrajectoryGroup, read_jsonl
from toolgym.envs.ref import EnvRef
from toolgym.errors import RunFailedError
from toolgym.imports import load_callable
from toolgym.training.rewards import RewardStage, WeightedSource, make_source

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "agents" / "arithmetic_openai.py"
ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", {"n_operands": 2})


@pytest.fixture(scope="module")
def played(tiny_model_dir):
    """A runtime with the Arithmetic env's pool and a gateway over the tiny model; `play`
    runs a harness on the first train tasks."""
    runtime = Runtime()

    async def start():
        engine = HFEngine(tiny_model_dir, max_batch_size=64)
        gateway = Gateway(engine, ChatRenderer(engine.tokenizer), engine.tokenizer)
        await gateway.start()
        return gateway

    gateway = runtime.run(start())
    pool = runtime.pool_for(ARITHMETIC)
    tasks = runtime.run(pool.acquire())
    draws = tasks.unwrapped.task_source().head("train", 16)
    pool.release(tasks)

    def play(harness, tasks=1, size=2, limits=None, **settings):
        settings = SessionSettings(SamplingParams(max_tokens=24, seed=3), **settings)
        collector = HarnessCollector(gateway, harness, result_check("env"), settings,
                                     runtime.pool_for, limits or HarnessLimits())  # fmt: skip
        requests = [GroupRequest(ARITHMETIC, d, size) for d in draws[:tasks]]
        return [t for g in runtime.run(collector.collect(requests)) for t in g.trajectories]

    yield play
    runtime.run(gateway.aclose())
    runtime.run(gateway.engine.aclose())
    runtime.close()


def example_agent():
    return CallableHarness(load_callable(f"{EXAMPLE}:solve", "agent"))


def test_an_agent_that_crashes_before_calling_the_model_masks_only_its_episode(played):
    solve = load_callable(f"{EXAMPLE}:solve", "agent")

    async def crashes_once(task, base_url, api_key):
        if task.id.endswith(":1"):
            raise RuntimeError("the agent's own bug")
        return await solve(task, base_url, api_key)

    episodes = played(CallableHarness(crashes_once), tasks=2, size=2)
    masked = [t for t in episodes if t.masked]
    assert [t.id.rsplit(":", 1)[1] for t in masked] == ["1", "1"]
    assert all(
        "the agent raised RuntimeError: the agent's own bug" in t.infra_error for t in masked
    )
    kept = [t for t in episodes if not t.masked]
    assert kept and all(t.steps and t.end is EpisodeEnd.TERMINATED for t in kept)
    assert all(t.messages[0]["content"].startswith("Work out the answer") for t in kept)


def test_an_agent_that_fails_on_the_policys_replies_counts_as_a_zero_not_a_mask(played):
    """A policy must not mask the episodes it is losing by breaking its agent: once the model
    has replied, the agent's crash or hang is the policy's doing."""

    async def breaks_on_the_reply(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": task.prompt}], max_tokens=4
        )
        if task.id.endswith(":1"):
            await asyncio.sleep(3600)  # a loop the replies kept going
        raise RuntimeError("could not parse the reply")

    episodes = played(CallableHarness(breaks_on_the_reply), tasks=2, size=2,
                      limits=HarnessLimits(60, idle_timeout_s=1.0))  # fmt: skip
    assert len(episodes) == 4 and not any(t.masked for t in episodes)
    assert all(t.total_reward == 0.0 and not t.success for t in episodes)
    errors = [t.steps[-1].error for t in episodes]
    assert all(e.startswith("the agent failed after the policy's replies: ") for e in errors)
    assert sum("could not parse the reply" in e for e in errors) == 2
    assert sum("abandoned" in e for e in errors) == 2


def test_the_result_is_the_episodes_recorded_score_and_never_a_step_reward(played):
    """The env's checker scores the agent's result; the verdict is the trajectory's `result`
    score (what the reward source of that name pays), `Step.reward` stays the env's (0:
    the agent's calls never reached the env), and only a right answer is a success."""

    def agent(answer_right: bool | None):
        async def solve(task, base_url, api_key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": task.prompt}], max_tokens=4
            )
            if answer_right is None:
                return None  # no answer: the policy's failure, a 0, never a mask
            a, op, b = task.prompt.removeprefix("What is ").rstrip("?").split()
            value = (
                int(a) + int(b) if op == "+" else int(a) - int(b) if op == "-" else int(a) * int(b)
            )
            return str(value if answer_right else value + 1)

        return CallableHarness(solve)

    right, wrong = played(agent(True), tasks=3), played(agent(False), tasks=3)
    assert all(t.scores == {"result": 1.0} and t.success for t in right)
    assert all(t.scores == {"result": 0.0} and not t.success for t in wrong)
    assert all(s.reward == 0.0 for t in right + wrong for s in t.steps)
    assert all(t.verdict == "Correct." and t.answer.lstrip("-").isdigit() for t in right)
    assert all(t.verdict == "Incorrect." for t in wrong)  # kept, to read afterwards
    none = played(agent(None), tasks=3)
    assert all(not t.masked and t.scores == {"result": 0.0} for t in none)
    stage = RewardStage([WeightedSource("result", make_source("result"), 1.0)])
    for episodes in (right, wrong):  # a step's ids are unique: one step each
        asyncio.run(stage.score([TrajectoryGroup("g", 0, episodes)]))
    assert [t.steps[-1].rewards["result"] for t in right + wrong] == [1.0] * 6 + [0.0] * 6


def test_a_reward_the_agent_reports_is_its_own_score_and_never_its_success(played):
    """An agent may report a reward to its session; it is the episode's `agent` score, which
    the source of that name pays as the config weighs it. Success stays the checker's."""

    async def reports(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": task.prompt}], max_tokens=4
        )
        async with httpx.AsyncClient() as http:
            reply = await http.post(f"{base_url}/reward", json={"reward": 0.75},
                                    headers={"Authorization": f"Bearer {api_key}"})  # fmt: skip
            reply.raise_for_status()
        return "not a number"

    episodes = played(CallableHarness(reports), tasks=2)
    assert all(t.scores == {"agent": 0.75, "result": 0.0} and not t.success for t in episodes)

    async def reports_blind(task, base_url, api_key):  # never asks the model: no verdict
        async with httpx.AsyncClient() as http:
            await http.post(f"{base_url}/reward", json={"reward": 1.0},
                            headers={"Authorization": f"Bearer {api_key}"})  # fmt: skip
        if task.id.endswith(":1"):  # its sibling does, so the group is not refused whole
            await openai.AsyncOpenAI(base_url=base_url, api_key=api_key).chat.completions.create(
                model="m", messages=[{"role": "user", "content": task.prompt}], max_tokens=4
            )
        return "7"

    blind = played(CallableHarness(reports_blind), tasks=2)
    assert not any(t.success for t in blind if not t.steps) and any(not t.steps for t in blind)
    stage = RewardStage([WeightedSource("result", make_source("result"), 1.0),
                         WeightedSource("agent", make_source("agent"), 0.5)])  # fmt: skip
    asyncio.run(stage.score([TrajectoryGroup("g", 0, episodes)]))
    assert all(t.steps[-1].rewards == {"result": 0.0, "agent": 0.75} for t in episodes)


def test_a_hung_or_silent_agent_is_stopped_and_masked(played):
    async def hangs(task, base_url, api_key):
        await asyncio.sleep(3600)

    silent = played(CallableHarness(hangs), limits=HarnessLimits(60, idle_timeout_s=0.5))
    assert all(t.end is EpisodeEnd.TIMEOUT and "abandoned" in t.infra_error for t in silent)
    slow = played(CallableHarness(hangs), limits=HarnessLimits(0.5, idle_timeout_s=60))
    assert all(t.end is EpisodeEnd.TIMEOUT and "episode timeout" in t.infra_error for t in slow)


def test_a_spent_budget_is_a_zero_not_a_mask(played):
    async def talks_on(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        while True:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": task.prompt}], max_tokens=4
            )

    episodes = played(CallableHarness(talks_on), max_calls=3)
    assert all(not t.masked and t.end is EpisodeEnd.MAX_TURNS for t in episodes)
    assert all(len(t.steps) == 3 and t.total_reward == 0 for t in episodes)
    # each call re-sent the same messages without the reply: each is a segment of its own
    assert all(len(t.segments()) == 3 for t in episodes)


def test_an_agent_that_never_calls_the_model_stops_the_run_in_words(played):
    async def answers_alone(task, base_url, api_key):
        return "42"

    with pytest.raises(RunFailedError, match="made a model call through the gateway"):
        played(CallableHarness(answers_alone))


def test_64_agents_at_once_complete(played):
    episodes = played(example_agent(), tasks=16, size=4)
    assert len(episodes) == 64 and not any(t.masked for t in episodes)
    assert all(t.steps and t.end is EpisodeEnd.TERMINATED for t in episodes)


def test_a_command_line_is_a_harness(played, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, os, openai\n"
        "task = json.loads(os.environ['TOOLGYM_TASK'])\n"
        "client = openai.OpenAI()\n"  # OPENAI_BASE_URL and OPENAI_API_KEY, as any program
        "reply = client.chat.completions.create(model='m', max_tokens=8,\n"
        "    messages=[{'role': 'user', 'content': task['prompt']}])\n"
        "print(task['seed'])\n"
    )  # fmt: skip
    episodes = played(CommandHarness([sys.executable, str(script)]))
    assert all(not t.masked and len(t.steps) == 1 for t in episodes)
    failing = played(CommandHarness([sys.executable, "-c", "import sys; sys.exit('no key')"]))
    assert all(t.masked and "exited with 1: no key" in t.infra_error for t in failing)
    killed = played(CommandHarness([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"]))
    assert all(t.masked and "exited with" in t.infra_error for t in killed)
    silent = tmp_path / "silent.py"  # asks the model, then prints no answer
    silent.write_text(ASK_ONCE)
    unanswered = played(CommandHarness([sys.executable, str(silent)]))
    assert all(not t.masked and t.scores == {"result": 0.0} for t in unanswered)
    # the error that ended it is named, though the framework logged on after it
    logs_after = ("import atexit, sys\n"
                  "atexit.register(print, '[non-fatal] Tracing: max retries reached', file=sys.stderr)\n"
                  "raise LookupError('no route /v1/responses')\n")  # fmt: skip
    noisy = played(CommandHarness([sys.executable, "-c", logs_after]))
    reason = "exited with 1: LookupError: no route /v1/responses (then: [non-fatal] Tracing: max"
    assert all(t.masked and reason in t.infra_error for t in noisy)


ASK_ONCE = (
    "import openai\nopenai.OpenAI().chat.completions.create(model='m', max_tokens=4, "
    "messages=[{'role': 'user', 'content': 'hi'}])\n"
)
SNOOP = (
    ASK_ONCE
    + """
import json, os, signal, sys
task = json.loads(os.environ['TOOLGYM_TASK'])
seen = {'keys': sorted(task), 'secret': os.environ.get('TRAINER_SECRET'),
        'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}
try:
    os.kill(int(sys.argv[1]), 0)
    seen['reached_trainer'] = True
except OSError:
    seen['reached_trainer'] = False
print(json.dumps(seen))
"""
)


def test_a_command_gets_no_secret_no_task_fields_and_cannot_reach_the_trainer(
    played, tmp_path, monkeypatch
):
    """A policy that has the agent's shell read its environment, the task or its siblings'
    /proc finds nothing it could be paid for copying."""
    monkeypatch.setenv("TRAINER_SECRET", "hunter2")
    script = tmp_path / "snoop.py"
    script.write_text(SNOOP)
    seen = []

    class Recorded(CommandHarness):
        async def run(self, task, base_url, api_key):
            seen.append(json.loads(await super().run(task, base_url, api_key)))
            return ""

    played(Recorded([sys.executable, str(script), str(os.getpid())]), size=2)
    assert len(seen) == 2
    for one in seen:
        assert one["keys"] == ["id", "messages", "prompt", "seed"]  # no answer field
        assert one["secret"] is None and one["reached_trainer"] is False
        assert len(one["pids"]) <= 3  # its own namespace: bubblewrap's init, itself
    seen.clear()
    passed = Recorded([sys.executable, str(script), str(os.getpid())], pass_env=["TRAINER_SECRET"])
    played(passed, size=1)
    assert seen[0]["secret"] == "hunter2"


def test_what_a_command_leaves_running_ends_with_it(played, tmp_path):
    """A child that holds the command's output open neither keeps the episode waiting nor
    outlives it, isolated or not."""
    marker = f"toolgym-left-behind-{os.getpid()}"
    script = tmp_path / "leaves.py"
    script.write_text(
        ASK_ONCE + "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "print('done')\n"
    )
    for isolate in (True, False):
        started = time.monotonic()
        episodes = played(CommandHarness([sys.executable, str(script)], isolate=isolate), size=2)
        assert time.monotonic() - started < 30
        assert all(not t.masked for t in episodes), [t.infra_error for t in episodes]
        left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, marker)]
        assert left == [], isolate


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text.encode() in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


RUNS = {
    "openai": ("arithmetic_openai.py", []),
    "langgraph": ("arithmetic_langgraph.py", []),
    # smolagents' own system prompt is about 2,200 tokens: fewer, longer episodes
    "smolagents": ("arithmetic_smolagents.py", [
        "rollout.max_context_tokens=4096", "rollout.tasks_per_step=1",
        "rollout.rollouts_per_task=2", "eval.episodes=2", "optim.micro_batch_size=2",
    ]),
    "openai-async-partial": ("arithmetic_openai.py", [
        "mode=async", "async_training.partial_rollouts=true", "loss.mode=decoupled",
    ]),
}  # fmt: skip


@pytest.mark.parametrize("run_name", list(RUNS))
def test_a_harness_run_trains_and_evaluates_through_the_gateway(
    tiny_model_dir, tiny_tokenizer, tmp_path, run_name
):
    """Each example agent (and the plain one in async mode with partial rollouts) trains a few
    steps with the tiny model, on CPU, through `toolgym train`."""
    agent, overrides = RUNS[run_name]
    run = tmp_path / "run"
    done = run_cli(
        "train", "--config", str(ROOT / "configs" / "harness_arithmetic.yaml"),
        f"model={tiny_model_dir}", f"run_dir={run}", "steps=2", "rollout.tasks_per_step=2",
        "eval.episodes=4", "eval.every_steps=2", "optim.minibatches=1",
        "optim.micro_batch_size=8", f"harness.agent={EXAMPLE.parent / agent}:solve",
        'rewards=[{"source": "result"}, {"source": "format", "kwargs": {"invalid": -0.2}}]',
        *overrides, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2] and "eval/success" in metrics[-1]
    assert "reward/format" in metrics[-1]  # the run's other reward sources score it too
    assert "reward/result" in metrics[-1]  # the agent's result, through its reward source
    kept = read_jsonl(run / "rollouts" / "step_000002.jsonl")
    assert kept and all(t.steps and not t.masked for t in kept)
    assert all("calculator" in [s["function"]["name"] for s in t.tools] for t in kept)
    for t in kept:  # each turn's tokens are the policy's and carry their credit
        assert all(s.advantage is not None and s.response_end > s.response_start for s in t.steps)
        # the opening, then the reply (after the call's forced opening: tool_choice required)
        forced = tiny_tokenizer.decode(t.token_ids[t.prompt_length : t.steps[0].response_start])
        assert forced in ("", "<tool_call>")
    if run_name == "openai":  # the agent's tools ran in the agent: no env can replay them
        replay = run_cli("rollouts", "rescore", str(run), "--reward", "replay")
        assert replay.returncode != 0 and "cannot be replayed" in replay.stderr


def test_an_isolated_command_sees_the_runs_directory_empty(tmp_path):
    """The run's stored episodes hold tasks' answers (an evaluation's, its `expected`): an
    agent, or a shell tool of its, that went looking finds an empty folder."""
    run_dir = tmp_path / "run"
    (run_dir / "evaluations").mkdir(parents=True)
    (run_dir / "evaluations" / "step_000000.jsonl").write_text('{"expected": "42"}\n')
    look = f"ls -A {run_dir}; cat {run_dir}/evaluations/step_000000.jsonl; echo done"
    task = HarnessTask("t", "What is 6 * 7?", [], 0)
    hidden = CommandHarness(["sh", "-c", look], hidden=[run_dir])
    seen = asyncio.run(hidden.run(task, "http://127.0.0.1:9/v1", "key"))
    assert seen == "done"  # nothing listed, nothing read
    shown = CommandHarness(["sh", "-c", look])  # the same command, nothing hidden
    assert "42" in asyncio.run(shown.run(task, "http://127.0.0.1:9/v1", "key"))
    assert (run_dir / "evaluations" / "step_000000.jsonl").exists()  # hidden, not touched


def test_an_isolated_command_dies_with_a_killed_trainer(tmp_path):
    marker = f"toolgym-orphan-{os.getpid()}"
    trainer = tmp_path / "trainer.py"
    trainer.write_text(
        "import asyncio, sys\n"
        "from toolgym.agents.gateway.harness import CommandHarness, HarnessTask\n"
        f"argv = [sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}]\n"
        "task = HarnessTask('x', 'p', [], 0)\n"
        "asyncio.run(CommandHarness(argv).run(task, 'http://127.0.0.1:9', 'k'))\n"
    )
    process = subprocess.Popen([sys.executable, str(trainer)])
    try:
        deadline = time.monotonic() + 30
        while not _running(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(marker), "the command never started"
        process.kill()  # SIGKILL: the trainer runs no cleanup of its own
        process.wait()
        deadline = time.monotonic() + 10
        while _running(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(marker)
    finally:
        process.kill()


def _running(marker: str) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, marker)]


SOLVER = """import json, os, openai
task = json.loads(os.environ['TOOLGYM_TASK'])
openai.OpenAI().chat.completions.create(model='m', max_tokens=4,
    messages=[{'role': 'user', 'content': task['prompt']}])
a, op, b = task['prompt'].removeprefix('What is ').rstrip('?').split()
print({'+': int(a) + int(b), '-': int(a) - int(b), '*': int(a) * int(b)}[op])
"""


def test_toolgym_eval_plays_your_agent_against_the_policy(tiny_model_dir, tmp_path):
    """`toolgym eval --agent/--command`: the agent plays the held-out split against the
    policy behind the gateway, its answers checked by the env, in the eval's own table."""
    common = ["eval", "toolgym/Arithmetic-v0", "--model", str(tiny_model_dir), "-n", "4",
              "--env-arg", "n_operands=2", "--max-tokens", "16"]  # fmt: skip
    solver = tmp_path / "solver.py"
    solver.write_text(SOLVER)
    out = tmp_path / "solver.jsonl"
    done = run_cli(*common, "--command", f"{sys.executable} {solver}", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "100.0%" in done.stdout and "solver.py" in done.stdout  # 4 of 4, and who played
    played = read_jsonl(out)
    assert len(played) == 4 and all(t.scores == {"result": 1.0} and t.success for t in played)
    assert all(len(t.steps) == 1 and t.steps[0].reward == 0.0 for t in played)
    shown = run_cli("rollouts", "show", str(out))  # what it answered and was paid, readable
    # the task's answer is stored once the agent has finished, and shown beside its own
    assert all(t.expected == t.answer and t.expected.lstrip("-").isdigit() for t in played)
    assert (
        f"the agent answered: {played[0].answer} · the checker: Correct. · expected: "
        f"{played[0].expected}" in shown.stdout
    )
    assert "scores of the episode: result 1" in shown.stdout
    example = run_cli(*common, "--agent", f"{EXAMPLE}:solve", "--out", str(tmp_path / "e.jsonl"))
    assert example.returncode == 0, example.stderr[-2000:]
    kept = read_jsonl(tmp_path / "e.jsonl")
    assert len(kept) == 4 and all(t.steps and "result" in t.scores for t in kept)
    both = run_cli(*common, "--agent", f"{EXAMPLE}:solve", "--command", "true")
    assert (
        both.returncode != 0
        and "a function (package.module:function) or a command, one" in both.stderr
    )
    missing = run_cli(*common, "--agent", f"{tmp_path}/nowhere.py:solve")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    # the example worker serves the evaluation's episodes as long-lived workers
    worker = f"{sys.executable} {EXAMPLE.parent / 'arithmetic_worker.py'}"
    served = run_cli(*common, "--command", worker, "--worker", "--out", str(tmp_path / "w.jsonl"))
    assert served.returncode == 0, served.stderr[-2000:]
    kept = read_jsonl(tmp_path / "w.jsonl")
    assert len(kept) == 4 and all(t.steps and not t.masked and "result" in t.scores for t in kept)
    refused = run_cli(*common, "--agent", f"{EXAMPLE}:solve", "--worker")
    assert refused.returncode != 0 and "workers serve a command's episodes" in refused.stderr
