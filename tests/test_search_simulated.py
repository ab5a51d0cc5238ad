"""The simulated engine: a real tiny model writes the documents; the ZeroSearch noise schedule
holds by hand and statistically over many calls; the trainer's step reaches it through reset."""

from __future__ import annotations

import asyncio
import math

import pytest
from test_pool import SayEngine
from transformers import AutoTokenizer

import toolgym
from toolgym.agents.collector import RolloutCollector, requests_for
from toolgym.agents.engines import SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.writer import EngineWriter
from toolgym.envs import EnvRef, ListTasks, Resources
from toolgym.envs.resources import WRITER
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall
from toolgym.tools.search.engines.base import Controls
from toolgym.tools.search.engines.simulated import (
    NOISY,
    SELF,
    USEFUL,
    NoiseSchedule,
    SimulatedEngine,
)


def test_the_schedule_by_hand():
    s = NoiseSchedule(start=0.1, end=0.7, base=4)
    assert s.at(0, 100) == pytest.approx(0.1)
    assert s.at(100, 100) == pytest.approx(0.7)
    assert s.at(50, 100) == pytest.approx(0.1 + (2 - 1) / 3 * 0.6)  # 4 ** 0.5 = 2
    assert s.at(500, 100) == pytest.approx(0.7)  # clamped past the end
    assert NoiseSchedule(0.0, 1.0, base=1).at(25, 100) == pytest.approx(0.25)  # linear
    with pytest.raises(ConfigError, match=r"noise probabilities must be in \[0, 1\]"):
        NoiseSchedule(0.0, 1.5)
    with pytest.raises(ConfigError, match="base b must be positive"):
        NoiseSchedule(base=0)


class Recording:
    """The real writer (the tiny model on the hf engine), remembering which instruction each
    request carried."""

    def __init__(self, writer: EngineWriter) -> None:
        self.writer = writer
        self.instructions: list[str] = []

    async def write(self, messages, max_tokens, temperature, seed):
        text = messages[0]["content"]
        self.instructions += [
            name for name, i in (("useful", USEFUL), ("noisy", NOISY), ("self", SELF)) if i == text
        ]
        return await self.writer.write(messages, max_tokens, temperature, seed)

    async def aclose(self) -> None:
        await self.writer.aclose()


@pytest.fixture(scope="module")
def writer(tiny_model_dir):
    return Recording(EngineWriter.load(tiny_model_dir))


def test_noise_follows_the_schedule_over_many_calls(writer):
    recording = writer
    schedule = NoiseSchedule(start=0.1, end=0.9, base=4)
    engine = SimulatedEngine(recording, schedule, max_tokens=8, seed=1)
    queries = [f"who founded company {i}" for i in range(25)]
    for step in (0, 5, 10):
        engine.set_training_step(step, 10)
        before = dict(engine.written)
        recording.instructions.clear()
        rows = asyncio.run(engine.search(queries, 8))
        n = 25 * 8
        noisy = engine.written["noisy"] - before["noisy"]
        p = schedule.at(step, 10)
        assert abs(noisy / n - p) <= 4 * math.sqrt(p * (1 - p) / n), (step, noisy / n, p)
        assert recording.instructions.count("noisy") == noisy  # the model was asked for them
        assert recording.instructions.count("useful") == n - noisy
        assert all(len(r) == 8 for r in rows)
        assert all(
            h.document.id.startswith("sim-") and h.document.contents for r in rows for h in r
        )


def test_self_search_has_no_noise_and_an_id_names_one_text(writer):
    """The same request with a seed writes the same documents under the same ids; without
    one the texts are new draws, and an id never carries two texts (it used to hang on the
    query and rank alone)."""
    recording = writer
    engine = SimulatedEngine.self_search(recording, max_tokens=8)
    recording.instructions.clear()
    seeded = [Controls(seed=7)]
    first = asyncio.run(engine.search_with(["capital of Zoumar"], 3, seeded))[0]
    again = asyncio.run(engine.search_with(["capital of Zoumar"], 3, seeded))[0]
    assert [h.document for h in first] == [h.document for h in again]
    assert len({h.document.id for h in first}) == 3
    texts: dict[str, set[str]] = {}
    for _ in range(3):
        for hit in asyncio.run(engine.search(["capital of Zoumar"], 3))[0]:
            texts.setdefault(hit.document.id, set()).add(hit.document.contents)
    assert all(len(t) == 1 for t in texts.values()) and len(texts) > 3
    assert set(recording.instructions) == {"self"} and engine.written["self"] == 15
    asyncio.run(recording.aclose())


def test_the_env_passes_the_trainer_step_and_shows_written_documents(tiny_model_dir):
    env = toolgym.make("toolgym/Search-v0", simulator=str(tiny_model_dir), noise=[0.0, 1.0, 4.0])
    with pytest.raises(ConfigError, match="no 'writer' provider here"):
        env.reset(seed=0)  # the model reaches the env only by injection
    resources = Resources({WRITER: EngineWriter.load})
    env.use_resources(resources)
    resources.clock.at(10, 10)  # as the runtime moves it before a step plays
    env.reset(seed=0)
    assert env.engine.noise == 1.0
    env.reset(seed=0, options={"training_step": (0, 10)})  # a reset option moves nothing
    assert env.engine.noise == 1.0
    obs, _, _, _, info = env.step(env.parser.render([ToolCall("search", {"query": "Trelix"})]))
    assert obs[0]["content"].startswith("Doc 1 [id sim-") and info["infra_error"] is None
    assert env.engine.written["noisy"] == 3 and len(info["state_key"]) == 3
    env.close()
    asyncio.run(resources.aclose())
    with pytest.raises(ConfigError, match="is not a model directory"):
        toolgym.make("toolgym/Search-v0", simulator="/nonexistent")
    with pytest.raises(ConfigError, match="noise is \\(p_start, p_end, base\\)"):
        toolgym.make("toolgym/Search-v0", simulator=str(tiny_model_dir), noise=[0.1])
    with pytest.raises(ConfigError, match="not both server_url and simulator"):
        toolgym.make(
            "toolgym/Search-v0", simulator=str(tiny_model_dir), server_url="http://127.0.0.1:1"
        )


def test_one_simulator_load_per_process_and_a_fresh_pattern_per_episode(tiny_model_dir):
    """64 episodes through the runtime: the simulator model loads once (a shared resource),
    and the episodes, all searching the same query, do not all get the same useful/noisy
    documents (the engine's generator runs on across episodes)."""
    loads = []

    def counting_load(model_dir):
        loads.append(model_dir)
        return EngineWriter.load(model_dir)

    search = ToolCall("search", {"query": "Trelix"})
    with Runtime(providers={WRITER: counting_load}) as runtime:
        kwargs = {"simulator": str(tiny_model_dir), "noise": [0.5, 0.5, 1.0], "max_turns": 1}
        pool = runtime.pool_for(EnvRef("simulated", "toolgym/Search-v0", kwargs))
        text = pool.factory().parser.render([search])
        renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))
        collector = RolloutCollector(
            SayEngine(renderer, text),
            renderer,
            RolloutConfig(SamplingParams(max_tokens=64)),
            runtime.pool_for,
        )
        draw = ListTasks.load([{"question": "Who founded Trelix?", "answers": ["x"]}] * 2)
        groups = runtime.run(collector.collect(requests_for(pool.ref, [draw.draw("train", 0)], 64)))
        assert runtime.resources.opened == 2  # the writer and the engine over it
    episodes = groups[0].trajectories
    assert len(episodes) == 64 and not any(t.masked for t in episodes)
    assert loads == [str(tiny_model_dir)]
    patterns = {t.steps[0].next_state_key for t in episodes}
    assert len(patterns) > 1, patterns
