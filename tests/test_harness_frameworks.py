"""The example agent written with real agent frameworks (LangGraph, smolagents, the OpenAI
Agents SDK on the Responses API and on chat completions, pydantic-ai), played against the
gateway on loopback by a tiny model taught to call the calculator: LangGraph, the SDK and
pydantic-ai send the replies back as they were given, so a multi-turn tool-using episode is
one token sequence; smolagents rewrites its conversation for its final answer, which starts
a segment. A framework's own turn limit is the policy's failure: it scores 0 and trains."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from conftest import built_once, teach
from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.gateway.collector import HarnessCollector
from toolgym.agents.gateway.harness import CallableHarness, CommandHarness, Harness
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.gateway.worker import WorkerHarness
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.envs.ref import EnvRef
from toolgym.imports import load_callable
from toolgym.training.player import rollout_metrics

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "agents"
COMMANDS = ("arithmetic_agents_sdk.py", "arithmetic_pydantic_ai.py")
"""Examples on frameworks that need the openai client's next major version: commands run
from build/frameworks (scripts/install-frameworks.sh, which `make test` runs)."""


def frameworks_python() -> Path:
    python = ROOT / "build" / "frameworks" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: `make frameworks` makes it (`make test` does)")
    return python


ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", {"n_operands": 2})
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>'


def _calculator_tool(parameters: dict, strict: bool) -> dict:
    return {"type": "function", "function": {
        "name": "calculator", "parameters": parameters, "strict": strict,
        "description": "Evaluate an arithmetic expression with + - * and parentheses."}}  # fmt: skip


FRAMEWORK_TOOLS = [
    _calculator_tool({"properties": {"expression": {"title": "Expression", "type": "string"}},
                      "required": ["expression"], "title": "calculator_args", "type": "object",
                      "additionalProperties": False}, True),
    _calculator_tool({"additionalProperties": False, "required": ["expression"],
                      "properties": {"expression": {"type": "string"}}, "type": "object"}, True),
]  # fmt: skip
"""The calculator as the Agents SDK and pydantic-ai describe it (as the gateway records it):
the model is taught the first turn under each framework's own words for the tool."""


def draws():
    from toolgym.envs.arithmetic.env import ArithmeticEnv

    return ArithmeticEnv(**ARITHMETIC.kwargs).task_source().head("train", 2)


def questions() -> list[str]:
    from toolgym.envs.arithmetic.env import generate_task

    return [generate_task(d.seed, 2)["question"] for d in draws()]


@pytest.fixture(scope="module")
def calculator_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model taught the example agent's first turn on the tasks the tests play (a
    calculator call) and, after the calculator's answer, a number."""

    def build(out: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        load_callable(f"{EXAMPLES / 'arithmetic_openai.py'}:solve", "agent")
        from arithmetic_openai import SYSTEM, TOOLS

        tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
        renderer = ChatRenderer(tokenizer)
        end = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        examples = []
        for question, tools in itertools.product(
            questions(), [TOOLS, *([t] for t in FRAMEWORK_TOOLS)]
        ):
            opening = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
            first = renderer.prompt_ids(opening, tools)
            call = renderer.encode(CALL) + end
            after = (
                first + call + renderer.delta_ids([{"role": "tool", "content": "5"}], call, tools)
            )
            examples += [(first, call), (after, renderer.encode("5") + end)]
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        teach(model, tokenizer, examples, out, steps=300)

    return built_once(tmp_path_factory, "calculator-model", build)


@pytest.fixture(scope="module")
def play(calculator_model_dir):
    runtime = Runtime()

    async def start():
        engine = HFEngine(calculator_model_dir, max_batch_size=64)
        gateway = Gateway(engine, ChatRenderer(engine.tokenizer), engine.tokenizer)
        await gateway.start()
        return gateway

    gateway = runtime.run(start())

    def play_(example: str, size: int = 2, *args: str):
        """Play the example agent: a function, or a script (its args after it) run as a
        command from the frameworks' own environment."""
        if example.endswith(":worker"):  # the script as a long-lived worker
            script = EXAMPLES / example.removesuffix(":worker")
            harness: Harness = WorkerHarness([str(frameworks_python()), str(script)], workers=1)
        elif args or example in COMMANDS:
            harness = CommandHarness([str(frameworks_python()), str(EXAMPLES / example), *args])
        else:
            harness = CallableHarness(load_callable(f"{EXAMPLES / example}:solve", "agent"))
        settings = SessionSettings(SamplingParams(max_tokens=48, temperature=0.0), max_calls=4)
        collector = HarnessCollector(gateway, harness, result_check("env"), settings,
                                     runtime.pool_for)  # fmt: skip
        groups = runtime.run(
            collector.collect([GroupRequest(ARITHMETIC, d, size) for d in draws()])
        )
        if isinstance(harness, WorkerHarness):
            runtime.run(harness.aclose())
            assert harness.started == 1  # one process served all four episodes
        return [t for g in groups for t in g.trajectories]

    yield play_
    runtime.run(gateway.aclose())
    runtime.run(gateway.engine.aclose())
    runtime.close()


@pytest.mark.parametrize(
    "example",
    [
        "arithmetic_openai.py",
        "arithmetic_langgraph.py",
        *COMMANDS,
        "arithmetic_agents_sdk.py --api chat",  # the SDK on chat completions
        "arithmetic_agents_sdk.py:worker",
        "arithmetic_pydantic_ai.py:worker",
    ],
)
def test_a_framework_that_keeps_its_history_gives_one_sequence(play, example):
    script, *args = example.split()
    episodes = play(script, 2, *args)
    assert all(not t.masked for t in episodes), [t.infra_error for t in episodes]
    for t in episodes:
        assert len(t.steps) >= 2 and t.segment_starts == []
        assert t.steps[0].tool_calls[0]["name"] == "calculator"
        assert t.steps[0].observation[-1]["role"] == "tool"
        assert t.steps[0].observation[-1]["content"] == "5"  # the framework ran its tool
        for before, after in zip(t.steps, t.steps[1:], strict=False):
            assert before.response_end < after.response_start  # one sequence, in order


def test_a_framework_that_rewrites_its_history_gets_segments_where_it_does(play):
    """smolagents sends back a reply it could not parse as it was given (the episode goes
    on), and asks for its final answer under a prompt of its own (a new segment)."""
    episodes = play("arithmetic_smolagents.py")
    assert all(not t.masked and t.steps for t in episodes), [t.infra_error for t in episodes]
    went_on = new_segments = 0
    for t in episodes:
        starts = {begin for begin, _ in t.segments()}
        for before, step in zip(t.steps, t.steps[1:], strict=False):
            opens = any(before.response_end <= b < step.response_start for b in starts)
            # a new segment's observation is the whole context it reads; a delta's is not
            assert opens == (before.observation[0]["role"] == "system")
            went_on, new_segments = went_on + (not opens), new_segments + opens
        for begin, end in t.segments():  # each segment ends with a reply sampled on it
            assert any(s.response_end == end and s.response_start > begin for s in t.steps)
    assert went_on and new_segments
    segments = sum(len(t.segments()) for t in episodes) / len(episodes)
    assert rollout_metrics("rollout", episodes, 1.0, [])["rollout/segments"] == segments > 1


@pytest.mark.parametrize(
    ("example", "limit", "raised"),
    [("arithmetic_agents_sdk.py", "--max-turns", "MaxTurnsExceeded"),
     ("arithmetic_pydantic_ai.py", "--max-calls", "UsageLimitExceeded")],
)  # fmt: skip
def test_a_framework_s_own_turn_limit_scores_0_and_trains(play, example, limit, raised):
    """The SDK's MaxTurnsExceeded and pydantic-ai's UsageLimitExceeded, raised after the
    policy's first reply, are the policy's failure: the episode is kept, scored 0."""
    episodes = play(example, 2, limit, "1")
    for t in episodes:
        assert not t.masked, t.infra_error
        assert len(t.steps) == 1 and t.steps[0].tool_calls[0]["name"] == "calculator"
        assert t.total_reward == 0.0 and not t.solved
        assert f"{raised}:" in t.steps[-1].error  # its exception line, read from the traceback
