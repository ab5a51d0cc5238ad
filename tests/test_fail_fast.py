"""A first custom env, tried as a new user would: every mistake stops the command with one
line that names the cause and a non-zero exit, instead of a traceback or a run that
"succeeds" on nothing."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from toolgym.agents.collector import summarize
from toolgym.agents.demonstrations import demonstrations
from toolgym.agents.render import ChatRenderer
from toolgym.agents.trajectory import read_jsonl
from toolgym.envs import make


def one_line_error(result, message: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.id=toolgym/Maz-v0", "env 'toolgym/Maz-v0' is not registered. Did you mean: toolgym/Maze-v0?"),
        ("env.kwargs.sise=3", "env 'toolgym/Maze-v0' has no argument 'sise'. Did you mean: size?"),
        ("env.kwargs.size=-1", "maze size must be a whole number of at least 2, got -1"),
        ("env.kwargs.size=big", "maze size must be a whole number of at least 2, got 'big'"),
        ("env.kwargs.n_doors=-1", "generating task 0 of split 'train' raised ValueError"),
    ],
)  # fmt: skip
def test_train_with_an_env_that_cannot_be_built_stops_at_once(
    cli, tiny_model_dir, tmp_path, override, message
):
    result = cli("train", f"model={tiny_model_dir}", f"run_dir={tmp_path}", "steps=1", override)
    one_line_error(result, message)
    assert not (tmp_path / "policy").exists()


def test_train_whose_rollouts_all_fail_stops_naming_the_cause(cli, tiny_model_dir, tmp_path):
    result = cli(
        "train", f"model={tiny_model_dir}", f"run_dir={tmp_path}", "steps=2",
        "env.id=fixture_envs:fixture/Raising-v0", "rollout.tasks_per_step=2",
        "rollout.rollouts_per_task=2", "rollout.max_tokens=8", "eval.episodes=2",
        "optim.micro_batch_size=4",
    )  # fmt: skip
    one_line_error(
        result,
        "training step 1: all 4 rollouts failed (4 env_failed); the first: "
        "step raised RuntimeError: sandbox died",
    )
    assert not (tmp_path / "policy").exists()
    # the episodes that stopped it stay readable, and the summary counts them with their reason
    kept = read_jsonl(tmp_path / "rollouts" / "step_000001.jsonl")
    assert len(kept) == 4 and all(t.masked for t in kept)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"].startswith("failed: training step 1: all 4 rollouts failed")
    assert summary["masked"]["episodes"] == 4
    assert summary["masked"]["reasons"] == {"step raised RuntimeError: sandbox died": 4}


def test_eval_with_a_rejected_value_or_a_failing_env(cli, tiny_model_dir, tmp_path):
    bad = cli("eval", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--env-arg", "size=-1")
    one_line_error(bad, "maze size must be a whole number of at least 2, got -1")
    failing = cli(
        "eval", "fixture_envs:fixture/Raising-v0", "--model", str(tiny_model_dir), "-n", "2",
        "--max-tokens", "4", "--out", str(tmp_path / "eval.jsonl"),
    )  # fmt: skip
    one_line_error(failing, "evaluating fixture_envs:fixture/Raising-v0: all 2 rollouts failed")
    assert len((tmp_path / "eval.jsonl").read_text().splitlines()) == 2  # nothing collected is lost


def test_the_openai_engine_without_a_tokenizer_says_what_to_pass(cli):
    result = cli(
        "eval", "toolgym/Maze-v0", "--engine", "openai", "--model", "served-name",
        "--base-url", "http://127.0.0.1:9/v1", "-n", "1",
    )  # fmt: skip
    one_line_error(result, "no tokenizer found at 'served-name'; pass --tokenizer DIR")


def test_module_ids_work_for_eval_and_sft_and_sft_needs_a_solver(cli, tiny_model_dir, tmp_path):
    evaluated = cli(
        "eval", "fixture_envs:fixture/Coin-v0", "--model", str(tiny_model_dir), "-n", "2",
        "--max-tokens", "4", "--out", str(tmp_path / "coin.jsonl"),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    tuned = cli(
        "sft", "fixture_envs:fixture/Coin-v0", "--model", str(tiny_model_dir), "--out",
        str(tmp_path / "sft"), "--episodes", "4", "--epochs", "1",
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    saved = json.loads((tmp_path / "sft" / "toolgym_env.json").read_text())
    assert saved == {
        "env_id": "fixture_envs:fixture/Coin-v0",
        "env_kwargs": {},
        "tool_schemas": True,
    }
    no_solver = cli(
        "sft", "fixture_envs:fixture/NoSolver-v0", "--model", str(tiny_model_dir), "--out",
        str(tmp_path / "none"),
    )  # fmt: skip
    one_line_error(no_solver, "fixture/NoSolver-v0 has no scripted solver")


def test_check_flags_a_tool_that_raises(cli):
    result = cli("check", "fixture_envs:fixture/BrokenTool-v0")
    assert result.returncode != 0
    assert "tool 'guess' raised in episode 0" in result.stdout + result.stderr
    assert "KeyError" in result.stdout + result.stderr


def test_tool_exceptions_are_their_own_kind_and_metric(tiny_tokenizer):
    import fixture_envs  # noqa: F401  (registers the fixture envs)

    env = make("fixture/BrokenTool-v0")
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.unwrapped.scripted_action())
    assert info["tool_calls"][0]["error"] == "exception" and "KeyError" in info["error"]
    env.close()
    source = make("fixture/BrokenTool-v0").unwrapped.task_source()
    demos = demonstrations(
        lambda: make("fixture/BrokenTool-v0"), ChatRenderer(tiny_tokenizer),
        source.head("train", 3),
    )  # fmt: skip
    stats = summarize([d.trajectory for d in demos])
    assert stats.tool_exception_rate == 1.0
    working = demonstrations(
        lambda: make("fixture/Coin-v0"), ChatRenderer(tiny_tokenizer), source.head("train", 3)
    )
    assert summarize([d.trajectory for d in working]).tool_exception_rate == 0.0


def test_a_trained_policy_keeps_the_env_settings_it_was_trained_with(cli, tiny_model_dir, tmp_path):
    """`toolgym eval --model RUN/policy` must prompt as training did (no schemas here)."""
    tuned = cli(
        "sft", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--out", str(tmp_path / "sft"),
        "--episodes", "4", "--epochs", "1", "--no-tool-schemas", "--env-arg", "size=2",
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    trained = cli(
        "train", f"model={tmp_path / 'sft'}", f"run_dir={tmp_path / 'rl'}", "steps=1",
        "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2", "rollout.max_tokens=8",
        "optim.micro_batch_size=4",
        "eval.every_steps=5", "eval.episodes=2",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    saved = json.loads((tmp_path / "rl" / "policy" / "toolgym_env.json").read_text())
    assert saved == {"env_id": "toolgym/Maze-v0", "env_kwargs": {"size": 2}, "tool_schemas": False}


DAMAGED_SETTINGS = {
    b'{"env_id": "toolgym/Maze-v0", "env_kwargs": {': "not JSON",  # cut off mid-write
    bytes(range(256)): "not JSON",
    b"[1, 2]": 'not an object with an "env_id"',
    b'{"env_id": "toolgym/Maze-v0", "env_kwargs": [1, 2], "tool_schemas": false}':
        '"env_kwargs" is a list, not an object',
    b'{"env_id": "toolgym/Maze-v0", "env_kwargs": {}}': '"tool_schemas" is None, not true or false',
    b'{"env_id": "toolgym/Maze-v0", "tool_schemas": "no"}': "\"tool_schemas\" is 'no'",
    b" " * (2 << 20): "over 1048576 bytes",
    b"[" * 500_000: "not JSON",  # too deep for the parser
    b'{"env_id": "toolgym/Maze-v0", "tool_schemas": "' + b"x" * 500_000 + b'"}': "'xxxx",
}  # fmt: skip


@pytest.mark.parametrize("content", DAMAGED_SETTINGS, ids=range(len(DAMAGED_SETTINGS)))
def test_damaged_saved_env_settings_are_named_not_ignored(tmp_path, content):
    """A model's toolgym_env.json that is cut off, garbage or of the wrong shape stops the
    command naming the file: ignored, the policy would be played in a format it never learned
    without a word (it was; a settings file for another env is still no settings)."""
    from toolgym.envs.saved_settings import read_env_settings
    from toolgym.errors import ConfigError

    (tmp_path / "toolgym_env.json").write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        read_env_settings(tmp_path, "toolgym/Maze-v0")
    message = str(raised.value)
    assert str(tmp_path / "toolgym_env.json") in message and DAMAGED_SETTINGS[content] in message
    assert "delete the file" in message and len(message) < 400


def test_a_model_with_damaged_env_settings_stops_eval_and_train_in_one_line(
    cli, tiny_model_dir, tmp_path
):
    import shutil

    from toolgym.envs.saved_settings import read_env_settings

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "toolgym_env.json").write_text('{"env_id": "toolgym/Maze-v0", "env_kwargs": [')
    for args in (["eval", "toolgym/Maze-v0", "--model", str(model), "-n", "2"],
                 ["train", f"model={model}", f"run_dir={tmp_path / 'run'}", "steps=1"]):  # fmt: skip
        one_line_error(cli(*args), "the env settings saved with this model are damaged")
    assert not (tmp_path / "run" / "policy").exists()
    (model / "toolgym_env.json").write_text('{"env_id": "toolgym/SQL-v0", "env_kwargs": {}}')
    assert read_env_settings(model, "toolgym/Maze-v0") is None  # another env's: none for this


def test_paths_and_settings_that_are_wrong_are_one_line_each(cli, tiny_model_dir, tmp_path):
    """Model directories that are not there or are not models, a run_dir that is a file, a
    LoRA target the model does not have, and a resumed run whose model is gone: each one line
    and a non-zero exit, before anything trains."""
    folder, afile = tmp_path / "not-a-model", tmp_path / "afile"
    folder.mkdir()
    afile.write_text("x")
    run = ["train", "steps=1", f"run_dir={tmp_path / 'run'}"]
    cases = [
        ([*run, "model=/no/such/model"], "model directory /no/such/model does not exist"),
        ([*run, f"model={folder}"], "is not a model directory (no config.json)"),
        ([*run, f"model={afile}"], "is a file; give a model directory"),
        (["train", "steps=1", f"model={tiny_model_dir}", f"run_dir={afile}"], "run_dir"),
        ([*run, f"model={tiny_model_dir}", "lora.enabled=true", "lora.target_modules=[nope]"],
         "lora.target_modules=['nope']: Target modules {'nope'} not found"),
        (["eval", "toolgym/Maze-v0", "--model", "/no/such/model", "-n", "2"], "does not exist"),
        (["eval", "toolgym/Maze-v0", "--model", str(folder), "-n", "2"], "not a model directory"),
        (["eval", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--tokenizer",
          "/no/such/tokenizer", "-n", "2"], "no tokenizer found at '/no/such/tokenizer'"),
    ]  # fmt: skip
    with ThreadPoolExecutor(2) as pool:  # independent processes, two at a time
        results = list(pool.map(lambda case: cli(*case[0]), cases))
    for (_, message), result in zip(cases, results, strict=True):
        one_line_error(result, message)
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    from toolgym.training.config import TrainConfig

    saved = TrainConfig(model=str(tmp_path / "gone"), run_dir=str(resumed))
    (resumed / "config.json").write_text(saved.model_dump_json())
    one_line_error(cli("train", "--resume", str(resumed)), "gone does not exist")


@pytest.mark.parametrize("env_id", ["toolgym/Maze-v0", "toolgym/Search-v0", "toolgym/Code-v0"])
def test_reset_options_of_the_wrong_shape_are_config_errors(env_id):
    from toolgym.errors import ConfigError

    env = make(env_id)
    try:
        for options, message in (({"task": 5}, "got int '5'"), ({"task": "q"}, "got str"),
                                 (5, "options must be a dict")):  # fmt: skip
            with pytest.raises(ConfigError, match=message):
                env.reset(options=options)
        env.reset(options={"task": None})  # no task: the seed picks one
    finally:
        env.close()
