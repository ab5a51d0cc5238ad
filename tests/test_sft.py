"""SFT warm start: scripted demonstrations through the rollout path, then imitation."""

from __future__ import annotations

import pytest

import toolgym
from toolgym.agents.demonstrations import demonstrations
from toolgym.agents.render import ChatRenderer
from toolgym.envs import SeedTasks
from toolgym.envs.tasks import content_key
from toolgym.training.supervised.sft import (
    SFTConfig,
    demonstration_nll,
    imitation_batch,
    sft,
    sft_draws,
)
from toolgym.training.supervised.warm_start import WarmStart, warm_start


def train(n):
    return SeedTasks().head("train", n)


def small_maze():
    return toolgym.make("toolgym/Maze-v0", size=2, max_turns=8)


def test_demonstrations_solve_and_have_exact_bookkeeping(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    demos = [d.trajectory for d in demonstrations(small_maze, renderer, train(5))]
    assert all(d.terminated and d.total_reward == 1.0 for d in demos)
    for d in demos:
        for s in d.steps:
            response = d.token_ids[s.response_start : s.response_end]
            assert response == renderer.encode(s.action) + renderer.closing_ids()


def test_injected_mistakes_stay_in_context_but_are_not_imitated(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    demos = demonstrations(small_maze, renderer, train(40), mistake_rate=0.3)
    again = demonstrations(small_maze, renderer, train(40), mistake_rate=0.3)
    assert [d.imitate for d in demos] == [d.imitate for d in again]  # seeded per episode
    flags = [f for d in demos for f in d.imitate]
    assert 0.15 < flags.count(False) / len(flags) < 0.45, flags
    for d in demos:
        env = small_maze()
        env.reset(seed=d.trajectory.seed)
        for step, imitated in zip(d.trajectory.steps, d.imitate, strict=True):
            if imitated:
                assert step.action == env.unwrapped.scripted_action()
            else:  # a move the solver would not make: into a wall or away from the goal
                assert step.action != env.unwrapped.scripted_action()
                assert '"name": "move"' in step.action
            env.step(step.action)
    # the solver recovers: most episodes (with a door on the way) still end at the goal in 8 turns
    assert sum(d.trajectory.terminated for d in demos) >= 24
    batch = imitation_batch(demos, tiny_tokenizer.pad_token_id)
    imitated_tokens = sum(
        s.response_end - s.response_start
        for d in demos
        for s, imitated in zip(d.trajectory.steps, d.imitate, strict=True)
        if imitated
    )
    assert batch.loss_mask.sum() == imitated_tokens


def test_mistakes_need_an_env_that_can_make_them(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    with pytest.raises(RuntimeError, match="ArithmeticEnv has no mistake_action"):
        demonstrations(lambda: toolgym.make("toolgym/Arithmetic-v0"), renderer, train(8),
                       mistake_rate=0.9)  # fmt: skip
    with pytest.raises(ValueError, match="mistake_rate"):
        demonstrations(small_maze, renderer, train(2), mistake_rate=1.0)


def test_sft_makes_the_model_imitate_held_out_demonstrations(tiny_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    renderer = ChatRenderer(tiny_tokenizer)
    demos, held_out = (
        demonstrations(small_maze, renderer, train(48)),
        demonstrations(small_maze, renderer, SeedTasks().head("eval", 8)),
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = demonstration_nll(model, held_out, tiny_tokenizer.pad_token_id)
    losses = sft(
        model,
        demos,
        tiny_tokenizer.pad_token_id,
        SFTConfig(epochs=4, lr=3e-3, batch_size=8, micro_batch_size=8),
    )
    after = demonstration_nll(model, held_out, tiny_tokenizer.pad_token_id)
    assert losses[-1] < losses[0]
    assert after < 0.4 * before, (before, after)


def test_sft_command_end_to_end(cli, tiny_model_dir, tmp_path):
    result = cli(
        "sft", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--out", str(tmp_path / "sft"),
        "--episodes", "16", "--epochs", "2", "--env-arg", "size=2", "--env-arg", "max_turns=8",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "16 demonstrations of toolgym/Maze-v0 (16 solved)" in result.stdout
    assert "held-out demonstration NLL per token" in result.stdout
    assert (tmp_path / "sft" / "config.json").is_file()
    # the library runs what the command runs: the same plan from Python ends where it did
    plan = WarmStart("toolgym/Maze-v0", {"size": 2, "max_turns": 8}, 16, SFTConfig(epochs=2))
    result_in_python = warm_start(tiny_model_dir, tmp_path / "from-python", plan)
    assert result_in_python.demonstrated.episodes == result_in_python.demonstrated.solved == 16
    nll = f"{result_in_python.nll_before:.3f} -> {result_in_python.nll_after:.3f}"
    assert f"held-out demonstration NLL per token: {nll}" in result.stdout
    assert sorted(p.name for p in (tmp_path / "from-python").iterdir()) == sorted(
        p.name for p in (tmp_path / "sft").iterdir()
    )
    bad = cli(
        "sft",
        "toolgym/Maze-v0",
        "--model",
        str(tiny_model_dir),
        "--out",
        str(tmp_path / "x"),
        "--env-arg",
        "sise=2",
    )
    assert bad.returncode == 2 and "has no argument 'sise'. Did you mean: size?" in bad.stderr


@pytest.mark.parametrize("env_id", ["toolgym/Search-v0", "toolgym/Maze-v0"])
def test_sft_demonstrates_training_tasks_and_measures_on_held_out_ones(env_id):
    """Whatever the first task and the number of episodes (past the end of a task list too),
    no held-out task is ever a demonstration, by content for a list and by seed for seeds."""
    source = toolgym.make(env_id).task_source()
    for first, episodes in ((0, 50), (170, 400)):
        demos, held_out = sft_draws(source, first, episodes)
        assert len(demos) == episodes and len(held_out) == min(16, source.size("eval") or 16)
        assert {d.split for d in demos} == {"train"} and {d.split for d in held_out} == {"eval"}
        assert not {content_key(d.task) for d in demos} & {content_key(d.task) for d in held_out}
