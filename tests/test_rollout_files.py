"""Stored rollouts as a user reads them again: the versioned schema, a damaged file that still
shows its readable part, re-scoring by replay or by another reward with the agreement
reported, and the Parquet export."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import fields

import jsonschema
import pyarrow.parquet as pq
import pytest

from conftest import ROOT, run_cli
from toolgym.agents.trajectory import SCHEMA_VERSION, Step, Trajectory, read_jsonl
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer


@pytest.fixture(scope="module")
def kept_run(tool_calling_model_dir, tmp_path_factory):
    """Two real training steps on 3x3 mazes with six episodes of each kept."""
    run = tmp_path_factory.mktemp("kept") / "run"
    config = load_config(TrainConfig, None, [
        f"model={tool_calling_model_dir}", f"run_dir={run}", "steps=2", "tensorboard=false",
        "env.kwargs={size: 3, max_turns: 3}", "rollout.tasks_per_step=2",
        "rollout.rollouts_per_task=3", "rollout.max_tokens=16", "eval.episodes=2",
        "rollouts_kept=6",
    ])  # fmt: skip
    Trainer(config).run()
    return run


def copy_of(run, tmp_path):
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_every_line_carries_the_schema_version_and_a_later_one_is_refused(kept_run, tmp_path):
    path = kept_run / "rollouts" / "step_000001.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["schema_version"] for line in lines} == {SCHEMA_VERSION}
    schema = json.loads(run_cli("rollouts", "schema").stdout)
    for line in lines:  # the printed JSON Schema describes what a run writes
        jsonschema.validate(line, schema)
    kept = read_jsonl(path)  # whole groups: two of the step's two, three episodes each
    assert sorted(Counter(t.group_id for t in kept).values()) == [3, 3]
    trained = [s for t in kept for s in t.steps]
    assert trained and all(isinstance(s.advantage, float) for s in trained)
    older = {k: v for k, v in lines[0].items() if k != "schema_version"}  # version 0
    later = lines[0] | {"schema_version": SCHEMA_VERSION + 1}
    (tmp_path / "mixed.jsonl").write_text(json.dumps(older) + "\n" + json.dumps(later) + "\n")
    with pytest.raises(
        ConfigError, match=rf"mixed.jsonl:2: .*reads versions up to {SCHEMA_VERSION}"
    ):
        read_jsonl(tmp_path / "mixed.jsonl")


def test_a_damaged_file_shows_what_it_can_and_says_what_it_skipped(kept_run, tmp_path):
    lines = (kept_run / "rollouts" / "step_000002.jsonl").read_text().splitlines()
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([lines[0], "not json", *lines[1:3], lines[3][:200]]))
    shown = run_cli("rollouts", "show", str(damaged), "--index", "2")
    assert shown.returncode == 0, shown.stderr
    assert "skipped 2 unreadable lines: line 2: JSONDecodeError" in shown.stdout
    assert "line 5: JSONDecodeError" in shown.stdout  # the line cut short
    assert "trajectory 2 of 3" in shown.stdout
    (tmp_path / "none.jsonl").write_text("not json\n")
    nothing = run_cli("rollouts", "show", str(tmp_path / "none.jsonl"))
    assert nothing.returncode == 2 and "holds no trajectory as toolgym writes them: line 1" in (
        nothing.stderr
    )


def test_replay_agrees_with_a_real_run_and_finds_a_reward_changed_after_it(kept_run, tmp_path):
    agreed = run_cli("rollouts", "rescore", str(kept_run), "--reward", "replay")
    assert agreed.returncode == 0, agreed.stderr
    assert "success agrees on 12 of 12 episodes, 100.0%" in agreed.stdout
    run = copy_of(kept_run, tmp_path)
    path = run / "rollouts" / "step_000002.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["steps"][-1]["reward"] = 1.0  # a return the env never gave
    lines[4]["infra_error"] = "sandbox died"  # masked: never scored, so not compared
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "scores.jsonl"
    found = run_cli("rollouts", "rescore", str(run), "--reward", "replay", "--step", "2",
                    "--out", str(out))  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert "success agrees on 4 of 5 episodes, 80.0%" in found.stdout
    assert "not compared: 1 masked (never scored), 0 that could not be scored" in found.stdout
    assert f"disagrees: {lines[1]['id']}: stored 1, now 0" in found.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["trajectory_id"] for r in rows if r["new"] != r["stored"]] == [lines[1]["id"]]


def test_another_reward_scores_the_stored_episodes_and_its_failures_are_counted(kept_run):
    bonus = run_cli("rollouts", "rescore", str(kept_run), "--reward", "function",
                    "--reward-arg", "path=fixture_rewards:first_member_bonus")  # fmt: skip
    assert bonus.returncode == 0, bonus.stderr
    stored = [t for p in sorted((kept_run / "rollouts").iterdir()) for t in read_jsonl(p)]
    firsts = sum(t.id.endswith(":0") for t in stored)
    agreeing = sum((t.total_reward > 0) == t.id.endswith(":0") for t in stored)
    assert f"success agrees on {agreeing} of 12 episodes" in bonus.stdout and firsts > 0
    broken = run_cli("rollouts", "rescore", str(kept_run), "--reward", "function",
                     "--reward-arg", "path=fixture_rewards:raises")  # fmt: skip
    assert broken.returncode == 2 and "Traceback" not in broken.stderr  # none: no agreement
    assert (
        "scored none of the 12 episodes: 0 masked, 12 that could not be scored (the first: "
        "KeyError: 'no such field')" in broken.stderr
    )
    unknown = run_cli("rollouts", "rescore", str(kept_run), "--reward", "no_such_source")
    assert unknown.returncode == 2 and "no_such_source" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    for stored in ("env", "result"):  # they would only add up what was stored: agree always
        again = run_cli("rollouts", "rescore", str(kept_run), "--reward", stored)
        assert again.returncode == 2 and "Traceback" not in again.stderr
        assert f"--reward {stored} reads back what the episodes stored" in again.stderr


def test_export_writes_a_row_per_episode_with_its_step_and_credit(kept_run, tmp_path):
    out = tmp_path / "rollouts.parquet"
    done = run_cli("rollouts", "export", str(kept_run), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"12 episodes from 2 files -> {out}" in done.stdout
    rows = pq.read_table(out).to_pylist()
    assert [r["step"] for r in rows] == [1] * 6 + [2] * 6
    stored = [t for p in sorted((kept_run / "rollouts").iterdir()) for t in read_jsonl(p)]
    for row, t in zip(rows, stored, strict=True):
        assert row["id"] == t.id and row["turns"] == len(t.steps)
        assert row["advantages"] == [s.advantage for s in t.steps]
        assert row["return"] == t.total_reward and row["success"] == t.success
        assert json.loads(row["trajectory"])["token_ids"] == t.token_ids  # nothing lost


def test_the_schema_page_documents_every_field():
    page = (ROOT / "docs" / "rollouts.md").read_text()
    documented = {name for row in re.findall(r"^\| (`.*?) \|", page, re.M)
                  for name in re.findall(r"`(\w+)`", row)}  # fmt: skip
    assert {f.name for f in fields(Trajectory)} <= documented
    assert {f.name for f in fields(Step)} <= documented
    assert f"with `schema_version` (now {SCHEMA_VERSION})" in page


def test_replay_plays_no_stored_task_the_env_would_not_take_from_a_client(tmp_path):
    """A rollout file is shared data: a stored task naming code to import, a file or a
    loopback page is refused in words, and the code is never imported."""
    import asyncio

    from toolgym.training.run.rescore import by_replay

    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\n\ndef check(page, task):\n    return 1.0\n"
    )
    hostile = [
        {"url": "http://127.0.0.1:9/", "instruction": "x", "check": f"{tmp_path}/evil.py:check"},
        {"url": "file:///etc/passwd", "instruction": "x", "check_js": "true"},
        {"url": "http://localhost:9/", "instruction": "x", "check_js": "true"},
        {"url": "http://127.0.0.1:9/", "instruction": "x", "check": "builtins:print"},
    ]
    stored = [Trajectory(f"t{k}", env_id="toolgym/Web-v0", seed=0, task=task)
              for k, task in enumerate(hostile)]  # fmt: skip
    rows = asyncio.run(by_replay(stored, {}))
    assert [r.new for r in rows] == [None] * len(hostile)
    assert all("not one of the env's own" in r.problem for r in rows), [r.problem for r in rows]
    assert not marker.exists()


def test_show_and_export_are_total_on_hostile_stored_text(kept_run, tmp_path):
    """A rollout file is shared data: escape sequences are shown as text, never written to
    the terminal; a line nested 100,000 deep or of the wrong types is skipped in words; a
    lone surrogate is shown as U+FFFD; a 10 MB word is cut, quickly."""
    import time

    first = (kept_run / "rollouts" / "step_000001.jsonl").read_text().splitlines()[0]
    line = json.loads(first)
    line["steps"][0]["action"] = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b[H hi"
    line["messages"][-1]["content"] = "a lone \ud800 surrogate"
    line |= {"answer": "\x1b[2J an answer", "verdict": "Correct."}  # a harness's, hostile
    huge = dict(line, id="huge")
    huge["steps"] = [dict(line["steps"][0], action="x" * 10_000_000)]
    wrong = dict(line, id="wrong")
    wrong["steps"] = [dict(line["steps"][0], reward="1")]
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    answered = dict(line, id="answered", answer={"an": "object"})
    scored = dict(line, id="scored", scores={"result": "1"})
    path = tmp_path / "hostile.jsonl"
    lines = [json.dumps(line), deep, json.dumps(wrong), json.dumps(answered), json.dumps(scored),
             json.dumps(huge)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    shown = run_cli("rollouts", "show", str(path), "--index", "0")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]52;c;" in shown.stdout and "\ufffd" in shown.stdout
    assert "skipped 4 unreadable lines" in shown.stdout
    assert "RecursionError" in shown.stdout and "reward and timings must be numbers" in shown.stdout
    assert "the agent answered: \\x1b[2J an answer" in shown.stdout
    started = time.monotonic()
    cut = run_cli("rollouts", "show", str(path), "--index", "1", timeout=60)
    assert cut.returncode == 0, cut.stderr
    assert time.monotonic() - started < 30
    assert "more characters]" in cut.stdout and len(cut.stdout) < 200_000
    exported = run_cli("rollouts", "export", str(path), "--out", str(tmp_path / "h.parquet"))
    assert exported.returncode == 0, exported.stderr
    assert len(pq.read_table(tmp_path / "h.parquet").to_pylist()) == 2
