"""Gymnasium's vector envs over every registered env, with Gymnasium's defaults: the async
one shares observations through memory (a registered handler for chat messages), and its
answers match the sync one's."""

from __future__ import annotations

import copy
import gc

import gymnasium
import numpy as np
import pytest
from shipped_envs import shipped_env_ids

import toolgym
from toolgym.envs.spaces import MessagesSpace, SharedObservations

SHIPPED = shipped_env_ids()
"""The envs toolgym ships (the test fixtures include deliberately broken ones)."""


@pytest.mark.parametrize("env_id", SHIPPED)
def test_async_vector_envs_step_every_registered_env(env_id):
    """Two copies, each stepped twice: four kinds of turn, played alike in worker processes
    and in this one (two copies, not four: a served env starts a server per process)."""
    turns = (("<tool_call>{}</tool_call>", "hello"), ("", "<answer>x</answer>"))
    runs = {}
    for mode in ("async", "sync"):
        envs = gymnasium.make_vec(env_id, 2, vectorization_mode=mode)
        try:
            first, _ = envs.reset(seed=7)
            runs[mode] = [first, *(envs.step(actions) for actions in turns)]
        except BaseException:
            envs.close(terminate=True)  # a plain close waits on the call that failed or hung
            raise
        envs.close()
    async_run, sync_run = runs["async"], runs["sync"]
    assert len(async_run[0]) == 2 and all(isinstance(o, list) and o for o in async_run[0])
    assert list(async_run[0]) == list(sync_run[0])
    for async_step, sync_step in zip(async_run[1:], sync_run[1:], strict=True):
        assert list(async_step[0]) == list(sync_step[0])
        for a, s in zip(async_step[1:4], sync_step[1:4], strict=True):
            np.testing.assert_array_equal(a, s)


def test_the_shared_view_reads_live_and_copies_to_a_tuple():
    envs = gymnasium.make_vec(
        "toolgym/Maze-v0", 2, vectorization_mode="async", vector_kwargs={"copy": False}
    )
    try:
        live, _ = envs.reset(seed=1)
        assert isinstance(live, SharedObservations)
        before = copy.deepcopy(live)
        assert isinstance(before, tuple) and before == tuple(live)
        envs.step(("hello", "hello"))
        assert tuple(live) != before  # the view shows the latest step
        assert live[-1] == live[1] and len(live[0:2]) == 2
    finally:
        envs.close()


def test_an_observation_too_large_for_its_slot_says_what_to_do():
    from gymnasium.vector.utils import create_shared_memory, write_to_shared_memory

    space = MessagesSpace(shared_bytes=64)
    memory = create_shared_memory(space, n=1)
    with pytest.raises(ValueError, match=r"shared_memory': False"):
        write_to_shared_memory(space, 0, [{"role": "user", "content": "x" * 100}], memory)


def test_an_env_dropped_without_close_releases_its_loop():
    env = toolgym.make("toolgym/Maze-v0")
    env.reset(seed=0)
    loop = env.unwrapped._loop
    assert loop is not None and not loop.is_closed()
    del env
    gc.collect()
    assert loop.is_closed()  # closed with the env, so no "unclosed event loop" warning
