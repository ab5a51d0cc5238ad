"""Registry: versioned ids, string entry points, did-you-mean errors, Gymnasium interop."""

from __future__ import annotations

import gymnasium
import pytest

import toolgym
from toolgym.envs import MessagesSpace
from toolgym.errors import ConfigError, RegistrationError, UnknownEnvError


def test_make_builds_registered_envs_with_kwargs_and_a_spec():
    env = toolgym.make("toolgym/Maze-v0", size=3, max_turns=7)
    assert env.size == 3 and env.max_turns == 7
    assert env.spec.id == "toolgym/Maze-v0"
    assert env.spec.kwargs == {"size": 3, "max_turns": 7}
    assert toolgym.spec("toolgym/Maze-v0").entry_point == "toolgym.envs.maze:MazeEnv"
    assert {"toolgym/Maze-v0", "toolgym/Arithmetic-v0"} <= set(toolgym.registered_ids())


def test_unknown_ids_suggest_close_matches():
    with pytest.raises(
        UnknownEnvError,
        match=r"env 'toolgym/Maz-v0' is not registered. Did you mean: toolgym/Maze-v0\?",
    ):
        toolgym.make("toolgym/Maz-v0")
    with pytest.raises(UnknownEnvError, match="registered versions: toolgym/Maze-v0"):
        toolgym.make("toolgym/Maze-v3")
    with pytest.raises(UnknownEnvError, match="Run `toolgym list`"):
        toolgym.make("nothing/Like-v0")
    with pytest.raises(LookupError):  # also catchable as the builtin it stands for
        toolgym.spec("toolgym/Mazes-v0")


def test_bad_keyword_arguments_name_the_real_ones():
    with pytest.raises(ConfigError, match=r"has no argument 'sise'. Did you mean: size\?"):
        toolgym.make("toolgym/Maze-v0", sise=3)


def test_entry_points_must_be_strings_and_ids_versioned():
    class Local(toolgym.ToolEnv):
        pass

    with pytest.raises(RegistrationError, match="must be a string 'package.module:Class'"):
        toolgym.register("mine/Local-v0", entry_point=Local)  # type: ignore[arg-type]
    with pytest.raises(RegistrationError, match="must look like 'namespace/Name-v0'"):
        toolgym.register("mine/Local", entry_point="x:Local")


def test_re_registration_is_idempotent_but_conflicts_are_errors():
    toolgym.register("mine/Twice-v0", "fixture_envs:CoinEnv")
    toolgym.register("mine/Twice-v0", "fixture_envs:CoinEnv")
    with pytest.raises(RegistrationError, match="already registered"):
        toolgym.register("mine/Twice-v0", "fixture_envs:WrongArityEnv")
    with pytest.warns(
        UserWarning, match="Overriding environment mine/Twice-v0"
    ):  # Gymnasium's own notice
        toolgym.register("mine/Twice-v0", "fixture_envs:WrongArityEnv", override=True)
    assert toolgym.spec("mine/Twice-v0").entry_point == "fixture_envs:WrongArityEnv"


def test_module_prefix_imports_on_demand():
    env = toolgym.make("fixture_envs:fixture/Coin-v0")
    obs, info = env.reset(seed=1)
    assert obs[-1]["content"] == "Heads or tails?"
    with pytest.raises(UnknownEnvError, match="cannot import module 'no_such_module_xyz'"):
        toolgym.make("no_such_module_xyz:fixture/Coin-v0")


def test_broken_entry_point_module_is_reported():
    toolgym.register("mine/Missing-v0", "no_such_module_abc:Env")
    with pytest.raises(RegistrationError, match="cannot import module 'no_such_module_abc'"):
        toolgym.make("mine/Missing-v0")


def test_ids_work_with_gymnasium_make():
    env = gymnasium.make("toolgym/Maze-v0", size=3)
    obs, info = env.reset(seed=5)
    assert isinstance(env.observation_space, MessagesSpace)
    assert info["state_key"] == env.unwrapped.state.key()
    move = env.unwrapped.scripted_action()
    obs, reward, terminated, truncated, info = env.step(move)
    assert info["valid_action"] and obs[0]["role"] == "tool"
    env.close()
