"""Generated tasks split by content: no seed of any split brings a train item into eval or
test, held-out splits hold each item once, and a small space says how few it holds."""

from __future__ import annotations

import pytest

from toolgym.envs.maze.env import MazeEnv
from toolgym.envs.tasks.content import ContentTasks, split_of
from toolgym.errors import ConfigError


def items_of(source: ContentTasks, split: str, n: int) -> list[str]:
    return [source.item_of(draw.seed) for draw in source.head(split, n)]


def test_an_item_lands_in_one_split_whatever_seed_makes_it():
    # 50 items, each made by many seeds (seed % 50): seeds disjoint by split are not enough
    source = ContentTasks(lambda seed: f"item {seed % 50}")
    train = items_of(source, "train", 2000)
    held = items_of(source, "eval", 100) + items_of(source, "test", 100)
    assert len(set(train)) > 30 and held
    assert not set(train) & set(held)
    assert all(split_of(item) == "train" for item in train)
    assert len(train) == 2000  # train repeats its items, as the generator makes them


def test_a_held_out_split_holds_each_item_once_and_says_when_it_runs_out():
    source = ContentTasks(lambda seed: f"item {seed % 50}")
    held = items_of(source, "eval", 100)
    assert len(held) == len(set(held)) < 50
    assert source.size("eval") == len(held)  # spent: its count is known
    with pytest.raises(ConfigError, match=f"holds {len(held)} distinct items"):
        source.task("eval", len(held))


def test_draws_are_the_same_on_every_run():
    def first(split: str) -> list[int]:
        return [d.seed for d in ContentTasks(lambda s: f"item {s % 997}").head(split, 20)]

    assert first("train") == first("train") and first("eval") == first("eval")
    assert set(first("train")).isdisjoint(first("eval"))


@pytest.mark.parametrize("size, doors", [(2, 0), (4, 1)])
def test_maze_eval_never_opens_a_train_maze(size, doors):
    env = MazeEnv(size=size, n_doors=doors)
    source = env.task_source()
    train, held = items_of(source, "train", 1000), items_of(source, "eval", 64)
    assert not set(train) & set(held)
    if size == 2:  # 8 mazes in all: a few held out, and the split says so
        assert 0 < len(held) < 8 and source.size("eval") == len(held)
    else:
        assert len(held) == 64 == len(set(held))
    # the item is the opening map the policy sees
    draw = source.head("eval", 1)[0]
    obs, _ = env.reset(seed=draw.seed, options={"task": draw.task})
    assert source.item_of(draw.seed) in obs[-1]["content"]


def test_a_generator_that_raises_is_a_one_line_config_error():
    def broken(seed: int) -> str:
        raise ValueError("size must be at least 2")

    with pytest.raises(ConfigError, match="generating task 0 of split 'train' raised ValueError"):
        ContentTasks(broken).head("train", 1)


def test_a_small_space_may_hold_out_a_larger_share_and_stays_disjoint():
    def split_counts(held_out: float) -> tuple[int, int, set[str]]:
        source = MazeEnv(size=3, n_doors=0, far_goal=False, held_out=held_out).task_source()
        train = set(items_of(source, "train", 3000))
        held = items_of(source, "eval", 2000) + items_of(source, "test", 2000)
        assert not train & set(held) and len(held) == len(set(held))
        return len(held), len(train), set(held)

    held_20, train_20, items_20 = split_counts(0.2)
    held_40, train_40, items_40 = split_counts(0.4)
    assert (held_20, held_40) == (198, 388)  # of 1,008 distinct 3x3 mazes
    assert train_40 < train_20 and items_20 < items_40  # the larger share holds the smaller's
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ConfigError, match="held-out share must lie in"):
            MazeEnv(size=3, held_out=bad)
    for not_a_number in ("a fifth", None, True):
        with pytest.raises(ConfigError, match="held-out share as a number"):
            MazeEnv(size=3, held_out=not_a_number)
