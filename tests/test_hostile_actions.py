"""Model output as a hostile model would write it: every env answers with a bounded, valid
observation and an invalid (penalisable) action, never an exception; and a fuzz suite over
every registered env's actions."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_envs import shipped_env_ids

import toolgym
from toolgym.agents.trajectory import Trajectory, read_jsonl, write_jsonl
from toolgym.envs.tool_env import FEEDBACK_CHARS

ENV_IDS = shipped_env_ids()
"""The envs toolgym ships (the test fixtures include deliberately broken ones)."""
MAX_OBSERVATION_CHARS = 40_000
"""What one turn's observation may cost at most: the tools' own results (16,000 characters
each at most) plus a bounded list of problems."""

HOSTILE = {
    "deep JSON": "<tool_call>" + "[" * 1000 + "</tool_call>",
    "deep JSON, unclosed": "<tool_call>" + "[" * 1000,
    "deep arguments": '<tool_call>{"name": "x", "arguments": ' + '{"a": ' * 500 + "1" + "}" * 501
    + "</tool_call>",
    "5,000-digit number": '<tool_call>{"name": "x", "arguments": {"a": ' + "1" * 5000 + "}}</tool_call>",
    "5,000-digit number in string arguments": '<tool_call>{"name": "x", "arguments": "{\\"a\\": '
    + "1" * 5000 + '}"}</tool_call>',
    "lone surrogate name": '<tool_call>{"name": "\\ud800"}</tool_call>',
    "lone surrogate argument": '<tool_call>{"name": "move", "arguments": {"direction": "\\udfff"}}</tool_call>',
    "10 MB name": '<tool_call>{"name": "' + "x" * 10_000_000 + '", "arguments": {}}</tool_call>',
    "10 MB argument": '<tool_call>{"name": "move", "arguments": {"direction": "' + "n" * 10_000_000
    + '"}}</tool_call>',
    "10,000 broken calls": "<tool_call>{}</tool_call>" * 10_000,
    "10,000 calls": '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'
    * 10_000,
}  # fmt: skip


def assert_bounded(obs: list[dict], info: dict) -> None:
    assert sum(len(m["content"]) for m in obs) <= MAX_OBSERVATION_CHARS
    for m in obs:
        m["content"].encode("utf-8")  # valid Unicode: no lone surrogates
    if info["error"] is not None:
        info["error"].encode("utf-8")
        assert len(info["error"]) <= FEEDBACK_CHARS + 100


@pytest.fixture(scope="module", params=ENV_IDS)
def env_per_id(request):
    """One instance per env, reset before each hostile turn: instances are reused in runs,
    and making one (a browser, a game worker, an MCP server) costs more than the turn."""
    env = toolgym.make(request.param)
    yield request.param, env
    env.close()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_turns_are_the_policys_mistake_with_a_bounded_answer(env_per_id, case):
    env_id, env = env_per_id
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(HOSTILE[case])
    assert_bounded(obs, info)
    assert info["infra_error"] is None
    if case != "10,000 calls" or env_id != "toolgym/Arithmetic-v0":
        assert not info["valid_action"]
    assert len(info["tool_calls"]) <= 16  # calls per turn are bounded by default


def test_a_lone_surrogate_reaches_neither_the_model_nor_a_broken_file(tmp_path, tiny_tokenizer):
    from toolgym.agents.render import ChatRenderer

    env = toolgym.make("toolgym/Maze-v0")
    env.reset(seed=0)
    obs, *_ = env.step(HOSTILE["lone surrogate name"])
    env.close()
    ChatRenderer(tiny_tokenizer).delta_ids(obs, [])  # the next prompt renders
    trajectory = Trajectory("t", task={"question": "\ud800"})
    path = write_jsonl([trajectory], tmp_path / "out.jsonl")
    json.loads(path.read_text())  # still valid JSON
    assert read_jsonl(path)[0].task == {"question": "\ufffd"}  # read back as text


@pytest.fixture(scope="module")
def live_envs():
    """One instance per env id for all the fuzzed turns, reset before each (as a run reuses
    its envs): a turn must leave the env fit for the next episode."""
    envs: dict[str, object] = {}
    yield envs
    for env in envs.values():
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
# 30 actions per env and run (hypothesis draws new ones each run): 60 cost the browser envs
# 80 s each of CI's time
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=300),
        st.builds(lambda body: f"<tool_call>{body}</tool_call>", st.text(max_size=300)),
        st.builds(
            lambda name, args: "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>",
            st.one_of(st.sampled_from(["move", "calculator", "answer", "search", "open", "click", "type",
                                       "select", "scroll", "click_at"]), st.text(max_size=20)),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                max_leaves=20,
            ),
        ),
    )
)  # fmt: skip
def test_fuzzed_actions_never_raise_and_stay_bounded(live_envs, env_id, action):
    env = live_envs.get(env_id) or live_envs.setdefault(env_id, toolgym.make(env_id))
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert_bounded(obs, info)
    assert info["infra_error"] is None
    assert isinstance(reward, float)
