"""Task sources: named splits that never share a task, by construction for seeds and by
content for lists; the trainer's draws from a task-list env never reach its eval tasks."""

from __future__ import annotations

import json

import pytest

from toolgym.config import load_config
from toolgym.envs import ListTasks, SeedTasks
from toolgym.envs.tasks import content_key
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer


def test_seed_tasks_give_each_split_its_own_range():
    tasks = SeedTasks()
    assert tasks.draw("train", 5).task == {"seed": 5} and tasks.draw("train", 5).seed == 5
    assert tasks.draw("eval", 5).seed == SeedTasks.SPAN + 5
    assert tasks.draw("test", 0).seed == 2 * SeedTasks.SPAN
    assert tasks.size("train") is None and len(tasks.head("eval", 7)) == 7
    with pytest.raises(ConfigError, match=r"outside \[0, 1000000000\)"):
        tasks.task("train", SeedTasks.SPAN)
    with pytest.raises(ConfigError, match="unknown split 'evals'. Did you mean: eval?"):
        tasks.task("evals", 0)


def questions(n):
    return [{"question": f"q{i}?", "answer": i} for i in range(n)]


def test_a_list_holds_out_by_content_whatever_the_order_and_duplicates():
    tasks = questions(50)
    split = ListTasks.load(tasks + tasks[:10])  # ten duplicates
    held = {content_key(t) for t in split.splits["eval"]}
    trained = {content_key(t) for t in split.splits["train"]}
    assert len(held) == 5 and not held & trained  # a tenth of the 50 distinct tasks
    assert len(split.splits["train"]) + len(split.splits["eval"]) == 60
    shuffled = ListTasks.load(list(reversed(tasks)))
    assert {content_key(t) for t in shuffled.splits["eval"]} == held
    assert ListTasks.load(questions(1)).size("eval") == 0
    with pytest.raises(ConfigError, match="there are no eval tasks"):
        ListTasks.load(questions(1)).task("eval", 0)


def test_explicit_splits_and_a_task_in_two_of_them(tmp_path):
    path = tmp_path / "tasks.jsonl"
    rows = [{**t, "split": "train"} for t in questions(3)] + [
        {"question": "x?", "answer": 0, "split": "test"}
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    split = ListTasks.load(path)
    assert (split.size("train"), split.size("eval"), split.size("test")) == (3, 0, 1)
    both = ListTasks.load({"train": questions(3), "eval": [{"question": "new?", "answer": 1}]})
    assert both.task("eval", 0)["question"] == "new?"
    with pytest.raises(ConfigError, match="a task is in both the train and the eval split"):
        ListTasks.load({"train": questions(3), "eval": questions(1)})
    with pytest.raises(ConfigError, match="unknown split 'dev'"):
        ListTasks.load([{"question": "x", "split": "dev"}])
    # held-out tasks alone make a transfer set; drawing a training task from it says why not
    transfer = ListTasks.load({"eval": questions(2)})
    assert transfer.size("eval") == 2
    with pytest.raises(ConfigError, match="there are no train tasks; give them"):
        transfer.draw("train", 0)


def test_training_runs_through_shuffled_passes_over_the_list():
    split = ListTasks({"train": questions(7)})
    first, second = (
        [split.task("train", i)["answer"] for i in range(k * 7, k * 7 + 7)] for k in (0, 1)
    )
    assert sorted(first) == sorted(second) == list(range(7)) and first != second
    assert [split.task("train", i)["answer"] for i in range(7)] == first  # the same every time


def test_the_trainer_never_draws_an_eval_task_of_a_task_list_env(tiny_model_dir, tmp_path):
    config = load_config(
        TrainConfig, None,
        [f"model={tiny_model_dir}", f"run_dir={tmp_path}", "env.id=toolgym/Search-v0",
         "rollout.tasks_per_step=16", "rollout.rollouts_per_task=2", "optim.micro_batch_size=2",
         "eval.episodes=1000"],
    )  # fmt: skip
    trainer = Trainer(config)
    try:
        evaluated = {content_key(r.draw.task) for r in trainer.player.eval_requests()}
        trained = {
            content_key(r.draw.task)
            for s in range(40)
            for r in trainer.groups.requests(s, trainer.config.rollout.tasks_per_step)
        }
    finally:
        trainer.close()
    assert len(evaluated) == 20 and len(trained) == 180  # 640 draws cover all 180 train tasks
    assert not evaluated & trained
