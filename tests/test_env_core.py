"""The Env contract itself: async and sync APIs, delta observations, info keys, and how
ToolEnv turns model mistakes and infrastructure failures into observations."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolgym
from toolgym.envs import INFO_KEYS, Outcome, ToolEnv
from toolgym.tools import InfraError, ToolCall


class Lookup(ToolEnv):
    """A tiny env: look up a word; 'answer' accepted as plain text ends it."""

    instructions = "Find the secret."

    async def start(self, seed, options):
        self.answered = False
        return [{"role": "user", "content": "What is the secret?"}]

    @toolgym.tool
    async def lookup(self, word: str) -> str:
        """Look up a word."""
        if word == "down":
            raise InfraError("dictionary server down")
        if word == "slow":
            await asyncio.sleep(5)
        return f"{word} means 42"

    async def on_text(self, text: str) -> str | None:
        if "42" in text:
            self.answered = True
            return "Accepted."
        return None

    def outcome(self) -> Outcome:
        return Outcome(1.0, True) if self.answered else Outcome()


def call(env: Any, word: str) -> str:
    return env.parser.render([ToolCall("lookup", {"word": word})])


def test_async_and_sync_apis_agree():
    async def run_async():
        env = Lookup()
        first = await env.areset(seed=1)
        step = await env.astep(call(env, "sun"))
        await env.aclose()
        return first, step

    env = Lookup()
    sync = (env.reset(seed=1), env.step(call(env, "sun")))
    env.close()
    assert asyncio.run(run_async()) == sync


def test_observations_are_deltas_and_info_has_every_key():
    env = Lookup()
    obs, info = env.reset(seed=0)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert "Find the secret." in obs[0]["content"] and "<tool_call>" in obs[0]["content"]
    assert set(INFO_KEYS) <= set(info) and info["tools"][0]["function"]["name"] == "lookup"
    obs, reward, terminated, truncated, info = env.step(call(env, "sun"))
    assert obs == [
        {"role": "tool", "tool_call_id": "call_1_0", "name": "lookup", "content": "sun means 42"}
    ]
    assert info["tool_calls"] == [
        {"id": "call_1_0", "name": "lookup", "arguments": {"word": "sun"}, "error": None}
    ]
    assert info["valid_action"] and info["error"] is None and info["infra_error"] is None
    assert [m["role"] for m in env.transcript] == ["system", "user", "assistant", "tool"]


def test_default_state_key_depends_on_the_observation_text_only():
    env = Lookup()
    _, info0 = env.reset(seed=0)
    *_, a = env.step(call(env, "sun"))
    *_, b = env.step(call(env, "sun"))  # different call ids, same text
    *_, c = env.step(call(env, "moon"))
    assert a["state_key"] == b["state_key"] != c["state_key"] != info0["state_key"]


def test_infra_errors_are_flagged_separately_from_model_errors():
    env = Lookup()
    env.reset(seed=0)
    obs, reward, *_, info = env.step(call(env, "down"))
    assert info["infra_error"] == "Error: tool 'lookup' is unavailable: dictionary server down"
    assert info["valid_action"]  # not the model's fault
    assert obs[0]["content"] == info["infra_error"]


def test_tool_timeout_override_and_text_answers():
    env = Lookup(tool_timeout_s=0.05)
    env.reset(seed=0)
    obs, *_, info = env.step(call(env, "slow"))
    assert obs[0]["content"] == "Error: tool 'lookup' timed out after 0.05 s."
    assert info["tool_calls"][0]["error"] == "timeout"
    obs, reward, terminated, truncated, info = env.step("The secret is 42.")
    assert obs == [{"role": "user", "content": "Accepted."}] and reward == 1.0 and terminated


def test_malformed_turn_keeps_the_good_calls_and_explains_the_bad():
    env = Lookup()
    env.reset(seed=0)
    text = (
        call(env, "sun") + '<tool_call>{"name": "lookup", "arguments": {"word": 3, }}</tool_call>'
    )
    obs, reward, terminated, truncated, info = env.step(text)
    assert obs[0]["content"] == "sun means 42"
    assert obs[1]["role"] == "user" and "tool call 2 is not valid JSON" in obs[1]["content"]
    assert not info["valid_action"] and "char" in info["error"]


def test_invalid_action_reward_is_added():
    env = Lookup(invalid_action_reward=-0.1)
    env.reset(seed=0)
    assert env.step("nothing useful")[1] == pytest.approx(-0.1)


def test_sync_api_inside_a_running_loop_says_what_to_do():
    async def inside():
        Lookup().reset(seed=0)

    with pytest.raises(RuntimeError, match=r"use `await env.areset\(\)`"):
        asyncio.run(inside())


class OnItsLoop(Lookup):
    """Records the loop each episode started on and shares a loop-bound resource (as an HTTP
    session is), which notes the loop it was made on."""

    async def start(self, seed, options):
        self.loop = asyncio.get_running_loop()
        self.session = await self.shared("session", lambda: {"made on": self.loop})
        return await super().start(seed, options)


def test_the_sync_api_runs_on_the_loop_of_the_resources_an_env_shares():
    """Sync and async users of one set share what it made: an env sharing resources that live
    on a loop runs its sync calls there (run on it while it is idle, handed to it from another
    thread while it runs), never on a private loop their loop-bound resources cannot serve."""
    import threading

    from toolgym.envs.resources import Resources

    loop = asyncio.new_event_loop()
    resources = Resources(loop=loop)
    idle, running = OnItsLoop(), OnItsLoop()
    idle.use_resources(resources)
    running.use_resources(resources)
    idle.reset(seed=0)
    assert idle.loop is loop
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        running.reset(seed=0)
        assert running.loop is loop and running.session is idle.session
        assert resources.opened == 1 and running.session["made on"] is loop
        assert running.step(call(running, "sun"))[4]["error"] is None
        running.close()
        idle.close()
        assert not loop.is_closed()  # the resources' loop is theirs, not the env's
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    loop.run_until_complete(resources.aclose())
    loop.close()
    alone = OnItsLoop()
    alone.reset(seed=0)
    assert alone.loop is not loop  # a private set: a private loop
    alone.close()


def test_close_is_idempotent_and_the_env_can_be_reused():
    env = Lookup()
    env.reset(seed=0)
    env.close()
    env.close()
    assert env.reset(seed=0)[0][1]["content"] == "What is the secret?"
    env.close()
    with pytest.raises(TypeError, match="an action is the model's text"):
        env.reset(seed=0)
        env.step(["not", "text"])  # type: ignore[arg-type]
    env.close()
