"""EnvPool: hundreds of concurrent episodes; an env that raises or hangs is an infra error
within its timeout while the others finish; nothing is leaked."""

from __future__ import annotations

import asyncio
import os
import threading

import fixture_envs
import toolgym
from toolgym.envs import EnvPool, StopReason, scripted_policy


def child_processes() -> list[str]:
    out: list[str] = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            out += f.read().split()
    return out


def maze():
    return toolgym.make("toolgym/Maze-v0", size=3)


def test_256_mazes_finish_while_a_raising_and_a_hanging_env_are_reported():
    threads, children = threading.active_count(), child_processes()
    step_timeout, close_timeout = 1.0, 0.5

    async def main():
        pool = EnvPool(
            [maze] * 256 + [fixture_envs.RaisingEnv, fixture_envs.HangingEnv],
            step_timeout_s=step_timeout,
            close_timeout_s=close_timeout,
        )
        async with pool:
            results = await pool.run(scripted_policy, range(258))
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return pool, results, leftover

    pool, results, leftover = asyncio.run(main())
    assert [r.seed for r in results] == list(range(258))
    good, raising, hanging = results[:256], results[256], results[257]
    assert all(
        r.stop is StopReason.TERMINATED and r.total_reward == 1.0 and not r.masked for r in good
    )
    assert raising.masked and raising.infra_error == "step raised RuntimeError: sandbox died"
    assert hanging.masked and hanging.infra_error == "step timed out after 1 s"
    assert hanging.stop is StopReason.INFRA_ERROR
    assert hanging.elapsed_s < step_timeout + close_timeout + 1.0
    assert raising.elapsed_s < step_timeout
    assert leftover == []
    assert all(e is None for e in pool.envs)  # closed on exit
    assert threading.active_count() == threads and child_processes() == children


def test_a_failed_env_is_rebuilt_and_its_slot_goes_on():
    built = []

    def flaky():
        env = fixture_envs.RaisingEnv() if not built else fixture_envs.CoinEnv()
        built.append(env)
        return env

    async def main():
        async with EnvPool([flaky], step_timeout_s=2) as pool:
            return await pool.run(scripted_policy, [0, 1, 2])

    results = asyncio.run(main())
    assert [r.masked for r in results] == [True, False, False]
    assert [r.total_reward for r in results[1:]] == [1.0, 1.0]
    assert len(built) == 2


def test_broken_factories_and_wrong_shapes_are_reported_with_their_phase():
    def no_env():
        raise OSError("no sandbox slots left")

    async def say_hi(view):
        return "hi"

    async def main():
        async with EnvPool([no_env, fixture_envs.WrongArityEnv], step_timeout_s=2) as pool:
            return await pool.run(say_hi, [0, 1]), await pool.run(scripted_policy, [2, 3])

    (failed_build, wrong_shape), (_, no_solver) = asyncio.run(main())
    assert failed_build.infra_error == "building the env raised OSError: no sandbox slots left"
    expected = "step returned 4 values, expected a 5-tuple (run `toolgym check`)"
    assert wrong_shape.infra_error == expected
    assert (
        no_solver.infra_error == "policy raised RuntimeError: WrongArityEnv has no scripted solver"
    )


def test_a_hanging_policy_is_an_infra_error_and_max_steps_stops_episodes():
    async def stuck(view):
        await asyncio.sleep(60)
        return ""

    async def wander(view):
        return view.env.parser.render([toolgym.tools.ToolCall("pick_up", {})])

    async def main():
        async with EnvPool([maze], step_timeout_s=0.2) as pool:
            hung = await pool.run(stuck, [0])
        async with EnvPool([maze], max_steps=3) as pool:
            capped = await pool.run(wander, [0])
        return hung[0], capped[0]

    hung, capped = asyncio.run(main())
    assert hung.infra_error == "policy timed out after 0.2 s"
    assert capped.stop is StopReason.MAX_STEPS and len(capped.steps) == 3 and not capped.masked


def test_policies_see_the_whole_conversation():
    seen = []

    async def policy(view):
        seen.append([m["role"] for m in view.messages])
        return view.env.scripted_action()

    async def main():
        async with EnvPool([fixture_envs.CoinEnv]) as pool:
            return await pool.run(policy, [3])

    result = asyncio.run(main())[0]
    assert seen == [["system", "user"]]
    assert result.steps[0].observation[0]["role"] == "tool"
