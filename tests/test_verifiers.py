"""toolgym/Verifiers-v0: environments built with the verifiers package (a single-turn one, a
multi-turn one whose tools are a verifiers Toolset served by verifiers itself) played in
toolgym's rollouts, scored by their own rubric, trained on; what cannot map is refused with
its reason."""

from __future__ import annotations

import json
import subprocess
import sys
from difflib import SequenceMatcher

import pytest
from vf_glossary.servers import FACTS

import toolgym
from conftest import run_ok
from toolgym.envs.tasks import content_key
from toolgym.errors import ConfigError
from toolgym.tools import ToolCall


def call(env, tool, **arguments):
    return env.step(env.parser.render([ToolCall(tool, arguments)]))


def test_a_single_turn_env_is_scored_by_its_own_rubric():
    env = toolgym.make("toolgym/Verifiers-v0", taskset="vf_reverse_text")
    obs, info = env.reset(seed=0)
    assert obs[0]["content"].startswith("Reverse the text") and info["tools"] == []
    text = obs[-1]["content"]
    obs, reward, terminated, truncated, info = env.step(
        f"<reversed_text>{text[::-1]}</reversed_text>"
    )
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["result"]["rewards"] == {"lcs": 1.0}
    assert info["result"]["metrics"]["reply_chars"] == len(text) + 31

    env.reset(seed=1)
    *_, info = env.step("<reversed_text>olleh</reversed_text>")
    text = env.unwrapped.task.data.answer
    assert info["result"]["rewards"]["lcs"] == pytest.approx(
        SequenceMatcher(None, "olleh", text).ratio()
    )

    env.reset(seed=2)  # a turn with a call (there are no tools): its single-turn stop ends it
    obs, reward, terminated, truncated, info = call(env, "reverse", text="x")
    assert terminated and reward == 0.0 and not info["valid_action"]
    env.close()


def test_a_multi_turn_env_calls_its_verifiers_toolset():
    env = toolgym.make("toolgym/Verifiers-v0", taskset="vf_glossary", max_turns=3)
    obs, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["facts_lookup"]
    entity = obs[-1]["content"].split('"')[1]
    obs, reward, terminated, truncated, info = call(env, "facts_lookup", name=entity)
    assert obs[0]["content"] == FACTS[entity] and not terminated and reward == 0
    obs, reward, terminated, truncated, info = call(env, "facts_lookup", name=7)  # refused here
    assert not info["valid_action"] and "name" in obs[0]["content"]
    obs, reward, terminated, truncated, info = env.step(f"It says: {FACTS[entity]}.")
    assert (reward, terminated) == (1.0, True)
    assert info["result"] == {"rewards": {"looked_up": 1.0}, "metrics": {"tool_calls": 2.0}}

    env.reset(seed=1)  # calls until the turn limit: truncated, and scored as it stands
    for _ in range(3):
        obs, reward, terminated, truncated, info = call(env, "facts_lookup", name="nobody")
    assert truncated and not terminated and info["result"]["rewards"] == {"looked_up": 0.0}
    env.close()


def test_eval_tasks_are_never_train_tasks_and_a_task_can_be_given():
    env = toolgym.make("toolgym/Verifiers-v0", taskset="vf_reverse_text", eval_fraction=0.25)
    tasks = env.unwrapped.task_source()
    train = {content_key(tasks.task("train", i)) for i in range(tasks.size("train"))}
    held = {content_key(tasks.task("eval", i)) for i in range(tasks.size("eval"))}
    assert len(held) == 20 and len(train) == 60 and not train & held
    obs, _ = env.reset(options={"task": {"prompt": "abc", "answer": "cba"}})
    assert obs[-1]["content"] == "abc"
    with pytest.raises(ConfigError, match="not a task of this taskset"):
        env.reset(options={"task": {"prompt": "abc"}})  # no answer
    env.close()


def test_what_cannot_map_is_refused_with_its_reason():
    with pytest.raises(ConfigError) as refused:
        toolgym.make("toolgym/Verifiers-v0", taskset="vf_unsupported")
    said = str(refused.value)
    for reason in ["Task.setup runs in a verifiers runtime", "reward file_written reads",
                   "stop long_reply reads the model's raw Response",
                   "CountingToolset keeps rollout state"]:  # fmt: skip
        assert reason in said, said
    with pytest.raises(ConfigError, match="no verifiers taskset 'no_such_taskset'"):
        toolgym.make("toolgym/Verifiers-v0", taskset="no_such_taskset")
    with pytest.raises(ConfigError, match="pairs"):
        toolgym.make("toolgym/Verifiers-v0", taskset="vf_reverse_text", settings={"pairs": "x"})


@pytest.mark.parametrize("taskset", ["vf_reverse_text", "vf_glossary"])
def test_the_trainer_takes_a_step_on_a_verifiers_env(tiny_model_dir, tmp_path, taskset):
    run = tmp_path / "run"
    run_ok("train", f"model={tiny_model_dir}", f"run_dir={run}", "steps=1",
           "env.id=toolgym/Verifiers-v0", f"env.kwargs.taskset={taskset}",
           "env.kwargs.max_turns=2", "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2",
           "rollout.max_tokens=32", "optim.micro_batch_size=4", "eval.every_steps=5",
           "eval.episodes=2")  # fmt: skip
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in r for r in rows if r["step"] == 1)
    episodes = [json.loads(line) for f in (run / "rollouts").glob("*.jsonl")
                for line in f.read_text().splitlines()]  # fmt: skip
    assert len(episodes) >= 4
    assert all(e["steps"][-1]["result"]["rewards"] for e in episodes if e["steps"]), episodes[0]


def test_without_the_extra_the_env_says_what_to_install():
    code = ("import sys; sys.modules['verifiers'] = None\nimport toolgym\n"
            "toolgym.make('toolgym/Verifiers-v0')")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "pip install 'toolgym[verifiers]'" in result.stderr.strip().splitlines()[-1]


def test_a_toolset_server_that_dies_is_an_infrastructure_error_then_comes_back():
    import os
    import signal

    from toolgym.envs.server_process import ServerProcess

    env = toolgym.make("toolgym/Verifiers-v0", taskset="vf_glossary")
    env.reset(seed=0)
    made = env.unwrapped.resources.made().values()
    (server,) = [s for s in made if isinstance(s, ServerProcess) and "GlossaryToolset" in s.name]
    os.killpg(server._process.pid, signal.SIGKILL)
    server._process.wait()
    *_, info = call(env, "facts_lookup", name="red fox")
    assert info["infra_error"] and "facts_lookup" in info["infra_error"]
    env.reset(seed=1)  # started again, on its port, for the next episode
    obs, *_, info = call(env, "facts_lookup", name="red fox")
    assert obs[0]["content"] == FACTS["red fox"] and info["infra_error"] is None
    env.close()
