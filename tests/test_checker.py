"""`toolgym check`: every registered env passes; broken envs get plain-words diagnostics."""

from __future__ import annotations

import asyncio

import pytest
from shipped_envs import shipped_env_ids

import fixture_envs
import toolgym
from toolgym.envs.checker import check_env
from toolgym.envs.tasks.held_out import shared_share, split_items

SHIPPED = shipped_env_ids()


@pytest.mark.parametrize("env_id", SHIPPED)
def test_every_shipped_env_passes_the_contract_checks(env_id):
    report = check_env(env_id)
    assert report.ok, [f"{f.check}: {f.message}" for f in report.failures()]
    # no shipped env's eval items are training's unless it says why
    held_out = next(f for f in report.findings if f.check == "held-out items")
    leaks = "open exactly as one of" in held_out.message
    assert not leaks or "(declared: " in held_out.message, held_out.message
    passed = {f.check for f in report.findings if f.status == "pass"}
    assert passed >= {"contract", "tasks", "gymnasium check_env", "episodes"}, [
        f"{f.check}: {f.status} {f.message}" for f in report.findings if f.status != "pass"
    ]


def test_a_good_third_party_env_passes():
    assert check_env("fixture/Coin-v0").ok


def test_an_env_whose_reward_pays_a_blind_answer_fails_in_words():
    report = check_env("fixture/SubstringCredit-v0")
    [failure] = report.failures()
    assert failure.check == "reward integrity"
    assert "pays answers that know nothing of the task" in failure.message
    assert "answer(text=every number up to 999): solved 6 of 6" in failure.message


def test_an_env_that_masks_a_policy_input_fails_in_words():
    report = check_env("fixture/SelfMasking-v0")
    [failure] = report.failures()
    assert failure.check == "reward integrity"
    assert "filed as an infrastructure failure" in failure.message
    assert (
        "look(an internal PostgreSQL error (3D000)): Error: tool 'look' is unavailable: the database failed"
        in failure.message
    )


def test_the_checks_share_one_set_of_resources_as_a_runs_instances_do():
    """Each check plays a fresh instance; a run's instances share the runtime's resources, so
    the checks' do too (one browser or server, not one per instance), the sync API's checks
    (Gymnasium's checker, close) included: their envs run on the loop the resources live on."""
    fixture_envs.SharedCoinEnv.opened = 0
    assert check_env("fixture/SharedCoin-v0").ok
    assert fixture_envs.SharedCoinEnv.opened == 1


def failure(env_id):
    report = check_env(env_id)
    assert not report.ok
    return report.failures()[0]


def test_wrong_step_arity_is_explained():
    f = failure("fixture/WrongArity-v0")
    assert f.check == "contract"
    assert f.message == (
        "step() must return 5 values (observation, reward, terminated, truncated, info); it returned a 4-tuple "
        "(the old Gym API returned 4 values with one `done`; split it into terminated and truncated)"
    )


def test_unhashable_state_key_is_explained():
    f = failure("fixture/UnhashableState-v0")
    assert f.check == "contract"
    assert f.message == (
        "reset()'s info['state_key'] is a list, which is not hashable; GiGPO groups steps by it, so use a string or a tuple"
    )


def test_an_info_value_of_the_wrong_kind_is_explained():
    f = failure("fixture/StringErrors-v0")
    assert f.check == "contract"
    assert f.message == (
        "step()'s info['tool_calls'] is a str; the rollout reads a list of dicts (id, name, "
        "arguments, error)"
    )


def test_tool_without_type_hints_is_explained():
    f = failure("fixture/UntypedTool-v0")
    assert f.check == "build"
    assert "could not build the env" in f.message
    assert "tool 'move': argument 'direction' has no type hint" in f.message


def test_not_an_env_is_explained():
    f = failure("fixture/NotAnEnv-v0")
    assert f.check == "build"
    assert "fixture_envs:NotAnEnv built a NotAnEnv, not a gymnasium.Env" in f.message
    direct = check_env(fixture_envs.NotAnEnv).failures()[0]
    assert direct.check == "class and spaces"
    assert "NotAnEnv is not a toolgym Env; subclass toolgym.Env" in direct.message


def test_cli_check_prints_plain_words_and_fails(cli):
    good = cli("check", "toolgym/Maze-v0")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "All checks passed." in good.stdout
    bad = cli("check", "fixture_envs:fixture/UnhashableState-v0")
    assert bad.returncode == 1
    assert "✗ contract: reset()'s info['state_key'] is a list, which is not hashable" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


def test_an_env_that_carries_state_into_the_next_episode_is_refused():
    failed = {f.check: f.message for f in check_env("fixture/Leaky-v0").failures()}
    assert {"determinism", "tasks"} <= set(failed)
    assert "instances are reused" in failed["tasks"]


def test_a_tool_that_raises_on_an_input_its_solver_never_gives_is_found():
    """The scripted episodes pass (the solver only says heads or tails); a model may say
    anything the schema allows, and the tool raised KeyError on it."""
    found = {f.check: f for f in check_env("fixture/FragileTool-v0").findings}
    assert found["episodes"].status == "pass"
    assert found["odd tool inputs"].status == "fail"
    assert "tool 'guess' raised on the input" in found["odd tool inputs"].message
    assert "KeyError" in found["odd tool inputs"].message


def test_eval_items_that_training_also_draws_are_reported_with_their_counts():
    """2x2 mazes without doors are 8 layouts: seeds apart are not mazes apart, so a split by
    seed replays training's mazes as held-out ones."""
    f = {f.check: f for f in check_env("fixture/SeedSplitMaze-v0").findings}["held-out items"]
    assert f.status == "warn" and "(declared: " not in f.message
    assert "100% of 64 eval draws (" in f.message and "distinct items" in f.message
    assert "shared_items" in f.message  # how to say why, where it is by design


def test_an_env_that_resets_slowly_still_has_its_eval_items_compared_with_train_items():
    """The held-out check stops drawing at its deadline: the splits' draws interleave, so an
    env whose resets take a browser's time is compared on both sides, not on eval draws alone
    (which would pass whatever training drew)."""

    async def drawn_in_a_second() -> tuple[list[str], list[str]]:
        env = toolgym.make("fixture/SlowSeedSplitMaze-v0")
        try:
            until = asyncio.get_running_loop().time() + 1.0  # about 50 resets
            return await split_items(env.unwrapped, 256, 64, until)
        finally:
            await env.aclose()

    train, held = asyncio.run(drawn_in_a_second())
    assert 5 <= len(held) <= 15 and 20 <= len(train) <= 60, (len(held), len(train))
    assert 3.5 <= len(train) / len(held) <= 4.5  # the splits' 256:64
    # its 8 mazes are in every split: most held draws meet their maze among the train draws
    # (all of them, unless a loaded machine drew so few that one maze was missed by chance)
    assert shared_share(held, train) >= 0.5


def test_a_declared_reason_turns_shared_items_into_a_warning():
    found = {f.check: f for f in check_env("fixture/Coin-v0").findings}
    assert found["held-out items"].status == "warn"
    assert "(declared: every episode asks the same question" in found["held-out items"].message


def test_a_space_too_small_to_hold_out_says_how_few_it_holds():
    """Maze splits by the maze itself: 2x2 mazes leave only a few for eval, and it says so."""
    small = {
        f.check: f for f in check_env("toolgym/Maze-v0", kwargs={"size": 2, "n_doors": 0}).findings
    }
    assert small["held-out items"].status == "warn"
    assert "the eval split holds " in small["held-out items"].message
    default = {f.check: f for f in check_env("toolgym/Maze-v0").findings}
    assert default["held-out items"].status == "pass"
    # a pass still shows the counts it rests on
    assert "distinct items in 64 eval draws" in default["held-out items"].message
    assert "0% of the eval draws open as a train draw does" in default["held-out items"].message
