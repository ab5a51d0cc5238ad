"""A newcomer's first hour, as they meet it: what the long commands print while they work,
and the defects a new user ran into, each fixed (every test here failed before its fix)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT, run_cli
from toolgym.agents.trajectory import read_jsonl
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.config import EvalSection, TrainConfig

STEP_LINE = re.compile(
    r"^step (\d)/2  success [\d.]+  reward [-\d.]+  valid [\d.]+  loss [-\d.e]+  "
    r"(kl [\d.]+  )?anchors [\d.]+  .*[\d.]+s  eta \d+:\d\d$",  # kl: when it is no rounding
    re.M,
)


def tiny_run(model, run_dir) -> list[str]:
    return [
        "train", f"model={model}", f"run_dir={run_dir}", "steps=2", "env.id=toolgym/Maze-v0",
        "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2", "rollout.max_tokens=8",
        "rollout.max_turns=3", "eval.episodes=2", "tensorboard=false",
    ]  # fmt: skip


def test_train_to_a_file_prints_a_line_per_step_and_keeps_rollouts(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(*tiny_run(tiny_model_dir, run_dir), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    out = result.stdout
    assert out.splitlines()[0].startswith(f"run {run_dir}: training {tiny_model_dir}")
    assert [m.group(1) for m in STEP_LINE.finditer(out)] == ["1", "2"], out
    assert "eval " in out.splitlines()[2]  # the last step's evaluation is on its line
    assert f"finished {run_dir} at step 2 of 2" in out
    log = (run_dir / "train.log").read_text()  # the same lines, kept with the run
    assert [line.split("  ")[1][:8] for line in log.splitlines() if "  step " in line] == [
        "step 1/2", "step 2/2"
    ]  # fmt: skip
    assert f"finished {run_dir} at step 2 of 2" in log and (run_dir / "summary.json").is_file()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["time/eval_s"] > 0  # the evaluation's own time, beside rollout and update
    assert "Warning" not in result.stderr  # no library's deprecation chatter at INFO
    # a sample of each step's trajectories is kept, and `rollouts show` reads the run dir
    kept = sorted(p.name for p in (run_dir / "rollouts").iterdir())
    assert kept == ["step_000001.jsonl", "step_000002.jsonl"]
    evaluated = read_jsonl(run_dir / "evaluations" / "step_000002.jsonl")  # the evaluation, whole
    assert len(evaluated) == 2 and all(t.id.startswith("Maze-v0:eval:") for t in evaluated)
    assert len((run_dir / "rollouts" / kept[-1]).read_text().splitlines()) == 4
    shown = run_cli("rollouts", "show", str(run_dir), "--index", "1")
    assert shown.returncode == 0 and "step_000002.jsonl: trajectory 1 of 4 kept" in shown.stdout
    # beside the episodes it kept, the step's own figures: what it played, not what it kept
    record = last | {"rollout/masked": 0}
    assert record["rollout/episodes"] == 4
    assert (
        f"the step: 4 episodes played · success {record['rollout/success']:.3f} (95% "
        f"{record['rollout/success_low']:.2f} to {record['rollout/success_high']:.2f}) · "
        f"valid calls {record['rollout/valid_actions']:.1%}" in shown.stdout
    ), shown.stdout
    assert "toolgym/Maze-v0 · seed" in shown.stdout and "turn 1: reward" in shown.stdout
    first = run_cli("rollouts", "show", str(run_dir), "--step", "1")
    assert first.returncode == 0 and "step_000001.jsonl" in first.stdout
    # metrics.jsonl given by mistake is one line naming it, not a TypeError traceback
    wrong = run_cli("rollouts", "show", str(run_dir / "metrics.jsonl"))
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "metrics.jsonl holds no trajectory as toolgym writes them: line 1" in wrong.stderr
    # a second run in the same directory is refused before any env or model is built
    again = run_cli(*tiny_run("/nonexistent/model", run_dir))
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert "nonexistent" not in again.stderr
    # from Python, the library's train() on the config the command parsed writes the same
    # run: the same files, the same metrics step by step, the same config but for its folder
    from toolgym.training.launch import train

    in_python = tmp_path / "in_python"
    overrides = tiny_run(tiny_model_dir, in_python)[1:]
    train(load_config(TrainConfig, None, overrides))
    assert sorted(p.name for p in in_python.iterdir()) == sorted(p.name for p in run_dir.iterdir())
    assert sorted(p.name for p in (in_python / "rollouts").iterdir()) == kept

    def records(run):
        return [
            sorted(json.loads(line)) for line in (run / "metrics.jsonl").read_text().splitlines()
        ]

    assert records(in_python) == records(run_dir)
    saved = [json.loads((run / "config.json").read_text()) for run in (run_dir, in_python)]
    assert saved[0].pop("run_dir") == str(run_dir) and saved[1].pop("run_dir") == str(in_python)
    assert saved[0] == saved[1]


def test_train_on_a_terminal_draws_a_bar_as_well(tiny_model_dir, tmp_path):
    main, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "TERM": "xterm-256color", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "toolgym", *tiny_run(tiny_model_dir, tmp_path / "run")],
        stdin=follower, stdout=follower, stderr=follower, cwd=ROOT, env=env, close_fds=True,
    )  # fmt: skip
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1.0)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:  # the process closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(main)
    assert process.wait(timeout=30) == 0
    out = b"".join(chunks).decode(errors="replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "training" in plain and "━" in plain  # the bar
    assert len(re.findall(r"step [12]/2  success", plain)) == 2  # and the lines


def test_a_smaller_run_needs_only_its_task_count(tmp_path):
    """micro_batch_size left unset follows the run down; set, it is still checked."""

    def config(*overrides: str) -> TrainConfig:
        return load_config(TrainConfig, None, [f"model={tmp_path}", *overrides])

    small = config("rollout.tasks_per_step=1", "rollout.rollouts_per_task=2")
    assert small.optim.micro_batch_size == 2
    assert config().optim.micro_batch_size == 8
    with pytest.raises(ConfigError, match=r"micro_batch_size \(8\) is larger"):
        config("rollout.tasks_per_step=1", "optim.micro_batch_size=8")
    with pytest.raises(ConfigError, match=r"minibatches \(9\) is more than the step's 8"):
        config("rollout.tasks_per_step=2", "optim.minibatches=9")


def test_one_env_arg_to_eval_keeps_the_other_saved_settings(tiny_model_dir, tmp_path):
    """A policy fine-tuned with env settings, evaluated with one more given: the saved
    ones stay (one --env-arg used to drop them all, silently) and the override is named."""
    import shutil

    from toolgym.envs.saved_settings import write_env_settings

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    write_env_settings(model, "toolgym/Maze-v0", {"size": 6, "max_turns": 2}, False)
    out = tmp_path / "eval.jsonl"
    result = run_cli(
        "eval", "toolgym/Maze-v0", "--model", str(model), "-n", "1", "--max-tokens", "4",
        "--env-arg", "max_turns=1", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "env settings saved with" in result.stdout and "size=6" in result.stdout
    assert "given --env-arg overrides max_turns (2 -> 1)" in result.stdout
    assert re.search(r"evaluating toolgym/Maze-v0 1/1  success", result.stdout)
    # transformers' loading bars and deprecation warnings are kept down below DEBUG
    assert "Warning" not in result.stderr and "Loading weights" not in result.stderr, result.stderr
    episode = json.loads(out.read_text().splitlines()[0])
    assert len(episode["steps"]) == 1  # max_turns given
    assert re.search(r"(?<!#)#{13}(?!#)", json.dumps(episode["messages"]))  # 6x6, as saved
    # from Python the library plays what the command played: the same settings and task
    from toolgym.agents.evaluation import EvalPlan, evaluate, setting

    plan = EvalPlan(env_id="toolgym/Maze-v0", model=str(model), env_kwargs={"max_turns": 1},
                    episodes=1, max_tokens=4)  # fmt: skip
    chosen = setting(plan)
    assert chosen.env_kwargs == {"size": 6, "max_turns": 1} and chosen.tool_schemas is False
    (in_python,) = evaluate(plan, chosen)
    assert in_python.messages[:2] == episode["messages"][:2] and len(in_python.steps) == 1


def test_eval_is_greedy_by_default_as_the_in_run_evaluation():
    from typer.testing import CliRunner

    from toolgym.cli import app

    shown = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"})
    assert re.search(r"0 is greedy, as the evaluation inside a training run.*\[default: 0\.0[];]",
                     " ".join(shown.output.split()))  # fmt: skip
    assert EvalSection().temperature == 0.0


def test_list_filters_and_keeps_ids_whole_off_a_terminal():
    listed = run_cli("list", env={"COLUMNS": "40"})
    lines = listed.stdout.splitlines()
    assert "toolgym/miniwob.click-checkboxes-soft-v0" in [line.split("\t")[0] for line in lines]
    sql = run_cli("list", "--filter", "SQL")
    assert sql.returncode == 0
    assert {line.split("\t")[0] for line in sql.stdout.splitlines()} == {
        "toolgym/SQL-v0", "toolgym/ProposeSQL-v0", "toolgym/EditSQL-v0",
    }  # fmt: skip
    nothing = run_cli("list", "-f", "no-such-env")
    assert nothing.returncode == 1 and "no registered env's id or description" in nothing.stdout


def test_play_takes_env_args():
    result = run_cli("play", "toolgym/Maze-v0", "--env-arg", "size=6", stdin=":quit\n")
    assert result.returncode == 0, result.stderr
    assert re.search(r"(?<!#)#{13}(?!#)", result.stdout)  # a 6x6 maze's wall (default 4x4)
    bad = run_cli("play", "toolgym/Maze-v0", "--env-arg", "sise=4", stdin=":quit\n")
    assert bad.returncode == 2 and "size" in bad.stderr and "Traceback" not in bad.stderr


def test_log_level_is_set_once_for_every_command():
    bad = run_cli("--log-level", "LOUD", "list")
    assert bad.returncode == 2 and "log level 'LOUD' is not one of DEBUG" in bad.stderr
    quiet = run_cli("list", env={"TOOLGYM_LOG": "ERROR"})
    assert quiet.returncode == 0


def test_a_script_that_imports_transformers_first_still_gets_no_progress_bars(
    tiny_model_dir,
):
    """The variables toolgym sets are read when transformers is imported; a script that
    imported it before toolgym is quietened through transformers' own calls."""
    script = (
        "import transformers\nfrom toolgym.log import setup_logging\nsetup_logging()\n"
        f"transformers.AutoModelForCausalLM.from_pretrained({str(tiny_model_dir)!r})\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRANSFORMERS_", "HF_HUB_"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Loading weights" not in done.stderr, done.stderr


def test_the_names_a_user_needs_come_from_toolgym():
    import toolgym
    from toolgym.tools.tool import ToolCallError

    assert toolgym.ToolCallError is ToolCallError
    for name in ("ToolEnv", "Outcome", "tool", "ToolSet", "TaskSource", "ListTasks", "InfraError"):
        assert getattr(toolgym, name) is not None


def test_servers_log_each_request(tiny_model_dir, tmp_path):
    from conftest import free_port, wait_until_answers

    port, log = free_port(), tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolgym", "serve", "model", str(tiny_model_dir), "--port",
             str(port)], stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "40"},
        )  # fmt: skip
        try:
            wait_until_answers(f"http://127.0.0.1:{port}/v1/models", process)
        finally:
            process.terminate()
            process.wait(timeout=20)
    text = log.read_text()
    # one whole line per request, however narrow the terminal variable says
    assert re.search(
        r'INFO toolgym\.serve: 127\.0\.0\.1 "GET /v1/models HTTP/1\.1" 200 \d+ bytes [\d.]+ s\n',
        text,
    ), text


def test_search_world_writes_a_corpus_to_index_and_questions_the_env_takes(tmp_path):
    import toolgym

    corpus, questions = tmp_path / "world.jsonl", tmp_path / "questions.jsonl"
    made = run_cli("search", "world", "--corpus", str(corpus), "--questions", str(questions),
                   "-n", "5", "--hops", "1")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "wrote 102 documents" in made.stdout and "wrote 5 questions" in made.stdout
    built = run_cli("index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"))
    assert built.returncode == 0 and "indexed 102 documents (bm25)" in built.stdout
    assert "bm25 indexing 102/102" in built.stdout  # its progress, off a terminal
    env = toolgym.make("toolgym/Search-v0", index=str(tmp_path / "idx"), tasks=str(questions))
    obs, _ = env.reset(seed=0)
    assert obs[-1]["content"].startswith("Question: ")
    env.close()
    bad = run_cli("search", "world", "--corpus", str(corpus), "--size", "huge")
    assert bad.returncode == 2 and "choose one of small" in bad.stderr


@pytest.mark.parametrize(
    ("env_id", "row", "reason"),
    [
        ("toolgym/Arithmetic-v0", {"question": "1+1?"}, "'answer' missing"),
        ("toolgym/MathCode-v0", {"answer": 3}, "'question' missing"),
        ("toolgym/SQL-v0", {"db_id": "shop_0", "question": "How many?"}, "'gold_sql' missing"),
        ("toolgym/Search-v0", {"question": "Who?", "answer": "Ada"}, "needs 'answers'"),
    ],
)
def test_a_task_file_row_that_does_not_fit_stops_the_env_when_it_is_made(
    tmp_path, env_id, row, reason
):
    """It used to fail only when an episode drew the row, with a traceback mid-run."""
    import toolgym

    good = {
        "toolgym/Arithmetic-v0": {"question": "2+2?", "answer": 4},
        "toolgym/MathCode-v0": {"question": "2+2?", "answer": 4},
        "toolgym/SQL-v0": {"db_id": "shop_0", "question": "How many?", "gold_sql": "SELECT 1"},
        "toolgym/Search-v0": {"question": "Who?", "answers": ["Ada"]},
    }[env_id]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ConfigError, match=rf"tasks\.jsonl row 2 .*{re.escape(reason)}"):
        toolgym.make(env_id, tasks=str(path))


def test_hostile_files_and_paths_are_one_line_each(tmp_path):
    """Random bytes, a row whose fields have the wrong types, and a corpus path that cannot
    be written: each a one-line error, never a traceback."""
    (tmp_path / "noise.jsonl").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "typed.jsonl").write_text('{"id": 1, "env_id": 2}\n')
    for name in ("noise.jsonl", "typed.jsonl"):
        shown = run_cli("rollouts", "show", str(tmp_path / name))
        assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr
        assert f"{name} holds no trajectory as toolgym writes them: line 1" in shown.stderr
    unwritable = run_cli("search", "world", "--corpus", "/proc/no/world.jsonl")
    assert unwritable.returncode == 2 and "Traceback" not in unwritable.stderr
    assert "cannot write /proc/no" in unwritable.stderr


def test_saved_env_settings_name_files_absolutely(tmp_path, monkeypatch):
    """A model fine-tuned with `--env-arg tasks=q.jsonl` run from one folder plays from any
    other: a relative path that exists is saved absolute; other text stays as given."""
    from toolgym.envs.saved_settings import read_env_settings, write_env_settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.jsonl").write_text("{}\n")
    (tmp_path / "games").mkdir()
    kwargs = {"tasks": "q.jsonl", "game": {"folder": "games"}, "style": "tags", "size": 2}
    write_env_settings(tmp_path, "toolgym/SQL-v0", kwargs, True)
    monkeypatch.chdir("/")
    saved = read_env_settings(tmp_path, "toolgym/SQL-v0").env_kwargs
    assert saved == {"tasks": str(tmp_path / "q.jsonl"), "game": {"folder": str(tmp_path / "games")},
                     "style": "tags", "size": 2}  # fmt: skip


def test_a_long_step_says_how_many_episodes_it_has_played(capsys):
    from toolgym.cli.progress import TrainSteps

    progress = TrainSteps(4, heartbeat_s=0.0)
    progress.episode(None)
    progress.episode(None)
    assert "step 1/4: 2 episodes played so far" in capsys.readouterr().out
    progress({"step": 1})
    progress.episode(None)
    assert "step 2/4: 1 episode played so far" in capsys.readouterr().out


def test_help_texts_are_plain_text_not_markup():
    """`pip install 'toolgym[dist]'` in a help text lost its [dist] to rich markup."""
    from typer.testing import CliRunner

    from toolgym.cli import app

    shown = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert "pip install 'toolgym[dist]'" in " ".join(shown.output.split())


def test_the_eta_counts_the_steps_pace_not_the_start_s_evaluation(capsys, monkeypatch):
    """A run that evaluates at its start: the step-0 line has no ETA, and step 1's is step
    1's own time times the steps left (the evaluation's minutes are not a step's)."""
    from toolgym.cli import progress as shown

    clock = iter([0.0, 600.0, 610.0])  # started; the start's evaluation took 10 minutes
    monkeypatch.setattr(shown.time, "perf_counter", lambda: next(clock))
    steps = shown.TrainSteps(4, heartbeat_s=1e9)
    steps({"step": 0, "eval/success": 0.4})
    steps({"step": 1, "rollout/success": 0.5})
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].endswith("eta ?") and lines[-1].endswith("eta 0:30")  # 10 s x 3 steps
