"""toolgym/TextWorld-v0 on games TextWorld generates here: the walkthrough wins every game of
a 100-game test set across the families, the same seed gives the same game, hostile commands
are refused with a bounded answer without ending the game, rewards follow the game's score,
and a game whose interpreter dies, hangs or cannot be made is the infrastructure's fault."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal

import gymnasium
import pytest

import toolgym
from toolgym.envs.textworld import TextWorldEnv
from toolgym.envs.textworld.commands import refusal
from toolgym.errors import ConfigError
from toolgym.tools.tool import InfraError


def game_settings(i: int) -> dict:
    """Game i of the test set: the families in turn, their knobs drawn from i."""
    rng = random.Random(i)
    family = ("custom", "coin_collector", "treasure_hunter", "cooking")[i % 4]
    if family == "custom":
        return {"family": family, "world_size": rng.randint(1, 6),
                "nb_objects": rng.randint(2, 10), "quest_length": rng.randint(1, 5)}  # fmt: skip
    if family in ("coin_collector", "treasure_hunter"):
        return {"family": family, "level": rng.randint(1, 15 if family == "coin_collector" else 20)}
    recipe = rng.randint(1, 3)
    return {"family": family, "recipe": recipe, "take": rng.randint(1, recipe),
            "go": rng.choice([1, 6]), "open": rng.random() < 0.5, "cook": rng.random() < 0.5,
            "cut": rng.random() < 0.5, "drop": rng.random() < 0.3}  # fmt: skip


async def play_walkthrough(env: TextWorldEnv, task: dict) -> tuple[float, bool, list]:
    """Reset to `task`, send the game's walkthrough; the return, whether it ended, the keys."""
    _, info = await env.areset(seed=0, options={"task": task})
    keys, total, terminated = [info["state_key"]], 0.0, False
    for command in env.walkthrough():
        _, reward, terminated, _, info = await env.astep(f"<command>{command}</command>")
        assert info["valid_action"] and info["infra_error"] is None, (task, command, info)
        total += reward
        keys.append(info["state_key"])
        if terminated:
            break
    return total, terminated, keys


GAMES = 20


def test_the_walkthrough_wins_each_of_20_generated_games_across_the_families():
    """Five games of each family, their knobs drawn at random (40 took 84 s of CI)."""

    async def run() -> list:
        envs = [TextWorldEnv(max_turns=100) for _ in range(2)]  # two workers: two cores
        tasks = [{**game_settings(i), "seed": 1000 + i} for i in range(GAMES)]
        results: list = []

        async def worker(env: TextWorldEnv) -> None:
            while tasks:
                task = tasks.pop()
                results.append((task, *await play_walkthrough(env, task)))

        try:
            await asyncio.gather(*(worker(env) for env in envs))
        finally:
            for env in envs:
                await env.aclose()
        return results

    results = asyncio.run(run())
    assert len(results) == GAMES
    assert {task["family"] for task, *_ in results} == {
        "custom", "coin_collector", "treasure_hunter", "cooking"}  # fmt: skip
    unsolved = [task for task, total, terminated, _ in results if not terminated or total != 1.0]
    assert not unsolved
    assert max(len(keys) for *_, keys in results) > 10  # some games take many steps


def test_the_same_seed_makes_the_same_game_keys_and_walkthrough(tmp_path):
    task = {"family": "treasure_hunter", "level": 12, "seed": 7}

    async def twice() -> list:
        plays = []
        for cache in ("a", "b"):  # each generates and compiles the game itself
            env = TextWorldEnv(cache_dir=tmp_path / cache)
            try:
                obs, _ = await env.areset(seed=0, options={"task": task})
                plays.append((obs, env.walkthrough(), await play_walkthrough(env, task)))
            finally:
                await env.aclose()
        return plays

    first, second = asyncio.run(twice())
    assert first == second
    assert len(set(first[2][2])) == len(first[2][2])  # each step of the walkthrough is a new state
    other = TextWorldEnv(cache_dir=tmp_path / "a")
    try:
        obs, _ = asyncio.run(other.areset(options={"task": {**task, "seed": 8}}))
    finally:
        asyncio.run(other.aclose())
    assert obs != first[0]


def test_generate_makes_the_seeds_games_in_order_with_several_workers(tmp_path):
    from conftest import run_cli

    game = json.dumps({"family": "coin_collector", "level": 2})
    folders = {jobs: tmp_path / f"jobs{jobs}" for jobs in (1, 2)}
    for jobs, folder in folders.items():  # each makes the games itself, in its own cache
        cache = {"TOOLGYM_TEXTWORLD_CACHE": str(tmp_path / f"cache{jobs}")}
        result = run_cli("textworld", "generate", "--game", game, "--count", "3", "--eval", "1",
                         "--first-seed", "40", "--jobs", str(jobs), "--out", str(folder),
                         env=cache, timeout=300)  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
    rows = [json.loads(line) for line in (folders[2] / "tasks.jsonl").read_text().splitlines()]
    assert [row["game"] for row in rows] == [f"coin_collector-{s}.z8" for s in range(40, 43)]
    assert [row.get("split") for row in rows] == [None, None, "eval"]
    for row in rows:  # the same game, whichever worker made it
        assert story(folders[2] / row["game"]) == story(folders[1] / row["game"])


def story(path) -> bytes:
    """A compiled game less its header's serial number (bytes 0x12-0x17), which is the date
    it was compiled on: a run across midnight compiles the same game twice, dated apart."""
    data = path.read_bytes()
    return data[:0x12] + data[0x18:]


HOSTILE_COMMANDS = {
    "10 MB": "<command>" + "x" * 10_000_000 + "</command>",
    "tool-call markup": '<command><tool_call>{"name": "command"}</tool_call></command>',
    "lone surrogates": "<command>go \ud800 north</command>",
    "quit": "<command>quit</command>",
    "restart": "<command>restart</command>",
    "save": "<command>save</command>",
    "undo": "<command>undo</command>",
    "two lines": "<command>look\nquit</command>",
    "chained": "<command>go north then quit</command>",
    "debug verb": "<command>tw-extra-infos facts</command>",
    "print every room and lock": "<command>enable print state option</command>",
    "print state, as typed": "<command>Enable  Print State Option</command>",
    "change the parser": "<command>restrict commands</command>",
    "escape sequence": "<command>\x1b[2J</command>",
    "NUL": "<command>look\x00</command>",
}


def test_hostile_commands_are_refused_bounded_and_the_game_goes_on():
    env = toolgym.make("toolgym/TextWorld-v0")
    try:
        _, info = env.reset(seed=3)
        start_key = info["state_key"]
        walkthrough = env.unwrapped.walkthrough()
        for case, action in HOSTILE_COMMANDS.items():
            obs, reward, terminated, truncated, info = env.step(action)
            assert not info["valid_action"] and info["infra_error"] is None, case
            assert not terminated and reward == 0.0, case
            assert info["state_key"] == start_key, case
            assert sum(len(m["content"]) for m in obs) < 2000, case
            for m in obs:
                m["content"].encode("utf-8")
        total = 0.0
        for command in walkthrough:  # the game was never left waiting on a question
            _, reward, terminated, _, info = env.step(f"<command>{command}</command>")
            total += reward
        assert terminated and total == 1.0
    finally:
        env.close()


def test_plain_commands_pass_and_out_of_game_ones_are_refused_with_the_reason():
    for ok in ("look", "Go  North", "take type-1 box from chest", "examine mom's hat"):
        assert refusal(ok) is None, ok
    assert "not a move in the game" in refusal("SAVE")
    assert "one command per turn" in refusal("look then go east")
    assert "plain words" in refusal("look.")


def test_the_reward_is_the_games_score_share_and_a_win_returns_one():
    env = TextWorldEnv()
    task = {"family": "cooking", "recipe": 2, "take": 2, "cook": True, "seed": 3}

    async def run() -> tuple[list[float], int]:
        try:
            await env.areset(options={"task": task})
            rewards = []
            while (action := env.scripted_action()) is not None:
                _, reward, terminated, _, _ = await env.astep(action)
                rewards.append(reward)
                if terminated:
                    break
            return rewards, env.frame["max_score"]
        finally:
            await env.aclose()

    rewards, max_score = asyncio.run(run())
    assert max_score > 1
    gains = [r for r in rewards if r]
    assert len(gains) == max_score and all(abs(g - 1 / max_score) < 1e-9 for g in gains)
    assert abs(sum(rewards) - 1.0) < 1e-9


def test_a_dead_or_hung_interpreter_is_masked_and_the_next_episode_plays():
    env = toolgym.make("toolgym/TextWorld-v0", step_timeout_s=2)
    try:
        env.reset(seed=5)
        os.kill(env.unwrapped.process.pid, signal.SIGKILL)
        *_, info = env.step("<command>look</command>")
        assert "game" in info["infra_error"]
        env.reset(seed=5)
        os.kill(env.unwrapped.process.pid, signal.SIGSTOP)  # alive, never answers
        *_, info = env.step("<command>look</command>")
        assert "did not answer" in info["infra_error"]
        _, info = env.reset(seed=5)
        _, _, _, _, info = env.step("<command>look</command>")
        assert info["infra_error"] is None and info["valid_action"]
    finally:
        env.close()


def test_a_process_forked_after_games_were_played_plays_its_own():
    """Gymnasium's async vector env forks its workers: the child must not wait on the
    parent's threads (a copied thread pool queues work for threads the child lacks)."""
    env = toolgym.make("toolgym/TextWorld-v0")
    try:
        env.reset(seed=5)
        env.step("<command>look</command>")  # the parent's waiter threads now exist
        envs = gymnasium.make_vec("toolgym/TextWorld-v0", 2, vectorization_mode="async")
        try:
            envs.reset_async(seed=5)
            observations, _ = envs.reset_wait(timeout=120)  # hung: the pool's copy in the child
            assert len(observations) == 2 and all(observations)
        finally:
            envs.close(terminate=True)
    finally:
        env.close()


def test_a_game_that_cannot_be_made_or_played_is_an_infra_error(tmp_path):
    broken = tmp_path / "broken.z8"
    broken.write_bytes(b"not a story file")
    broken.with_suffix(".json").write_text("{}")
    env = TextWorldEnv()

    async def reset(task: dict) -> None:
        await env.areset(options={"task": task})

    try:
        with pytest.raises(InfraError, match="cannot be played"):
            asyncio.run(reset({"game": str(broken)}))
        # a cooking game with these knobs trips TextWorld's generator
        bad = {"family": "cooking", "go": 9, "cut": True, "recipe": 1, "seed": 1043}
        with pytest.raises(InfraError, match="could not be made"):
            asyncio.run(reset(bad))
    finally:
        asyncio.run(env.aclose())


def test_tasks_name_game_files_or_settings_and_a_folder_of_games_splits_by_game(
    tmp_path, monkeypatch
):
    games = tmp_path / "games"
    made = TextWorldEnv(cache_dir=tmp_path / "cache")
    asyncio.run(made.areset(options={"task": {"family": "coin_collector", "level": 2, "seed": 1}}))
    asyncio.run(made.aclose())
    cached = sorted((tmp_path / "cache" / "coin_collector").glob("*.z8"))
    assert len(cached) == 1
    from toolgym.envs.textworld.generate import copy_game

    for i in range(4):  # four copies: four games as far as the folder is concerned
        copy_game(cached[0], games / f"g{i}.z8")
    env = TextWorldEnv(games=games)
    source = env.task_source()
    train = {t["game"] for t in source.splits["train"]}
    held = {t["game"] for t in source.splits["eval"]}
    assert train and held and not train & held and len(train | held) == 4
    obs, info = env.reset(seed=0)
    assert info["infra_error"] is None and env.walkthrough()
    env.close()
    monkeypatch.chdir(tmp_path)  # the folder named relative to where the command runs
    env = TextWorldEnv(games="games")
    assert env.task_source().splits == source.splits  # the same games, the same splits
    obs, info = env.reset(seed=0)
    assert info["infra_error"] is None and env.walkthrough()
    env.close()

    rows = tmp_path / "tasks.jsonl"
    rows.write_text(
        json.dumps({"game": "games/g0.z8", "split": "train"}) + "\n"
        + json.dumps({"family": "custom", "quest_length": 3, "seed": 4, "split": "eval"}) + "\n"
    )  # fmt: skip
    env = TextWorldEnv(tasks=rows)  # a relative game path is read from the file's folder
    for split in ("train", "eval"):
        draw = env.task_source().draw(split, 0)
        obs, info = env.reset(seed=draw.seed, options={"task": draw.task})
        assert env.walkthrough()
    env.close()

    (games / "old.ulx").write_bytes(b"glulx")
    with pytest.raises(ConfigError, match="Glulx"):
        TextWorldEnv(games=games)
    (games / "old.ulx").unlink()
    games.joinpath("g0.json").unlink()
    with pytest.raises(ConfigError, match="g0.json"):
        TextWorldEnv(games=games)
    with pytest.raises(ConfigError, match="quest_breadth"):
        TextWorldEnv(game={"quest_length": 1, "quest_breadth": 2})
    with pytest.raises(ConfigError, match="level"):
        TextWorldEnv(game={"family": "treasure_hunter", "level": 31})


def test_a_pool_is_a_fixed_number_of_games_per_split_the_same_as_generate_writes(tmp_path):
    game = {"family": "coin_collector", "level": 2}
    env = TextWorldEnv(game=game, pool={"train": 3, "eval": 2})
    source = env.task_source()
    assert sorted(source.draw("train", i).seed for i in range(3)) == [0, 1, 2]
    assert [d.seed for d in source.head("eval", 10)] == [3, 4]  # the eval split holds two
    obs, info = env.reset(options={"task": source.draw("eval", 1).task})
    env.close()
    written = tmp_path / "games"  # `generate --count 5 --eval 2`: the same games in the split
    from conftest import run_cli

    result = run_cli("textworld", "generate", "--game", json.dumps(game), "--count", "5",
                     "--eval", "2", "--out", str(written), timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    same = TextWorldEnv(tasks=written / "tasks.jsonl")
    assert same.reset(options={"task": same.task_source().draw("eval", 1).task})[0] == obs
    same.close()
    for pool, message in [({"trian": 3}, "unknown split 'trian'"), ({"train": -1}, "train -1"),
                          ({"train": "all"}, "train 'all'"), ({}, "games per split")]:  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            TextWorldEnv(game=game, pool=pool)
    with pytest.raises(ConfigError, match="one of"):
        TextWorldEnv(pool={"train": 1}, tasks=written / "tasks.jsonl")


def test_the_admissible_commands_option_lists_what_the_game_accepts():
    env = toolgym.make("toolgym/TextWorld-v0", admissible_commands=True)
    try:
        obs, _ = env.reset(seed=2)
        listed = obs[-1]["content"].split("Admissible commands: ")[1].split(", ")
        assert "look" in listed and "inventory" in listed
        assert listed == sorted(listed)
        obs, *_ = env.step("<command>inventory</command>")
        assert "Admissible commands: " in obs[-1]["content"]
    finally:
        env.close()


def test_a_slipping_solver_takes_one_detour_and_still_plays_the_game():
    env = TextWorldEnv(solver_slips=1.0, max_turns=50)

    async def run() -> tuple[list[bool], float]:
        try:
            await env.areset(options={"task": {"family": "coin_collector", "level": 4, "seed": 2}})
            on_policy, total = [], 0.0
            while (action := env.scripted_action()) is not None:
                best = env.frame["policy"][0]
                on_policy.append(f"<command>{best}</command>" == action)
                _, reward, terminated, truncated, _ = await env.astep(action)
                total += reward
                if terminated or truncated:
                    break
            return on_policy, total
        finally:
            await env.aclose()

    on_policy, total = asyncio.run(run())
    assert on_policy.count(False) == 1 and total == 1.0  # one detour, then back on the way
