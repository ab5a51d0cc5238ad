"""The bake-off bench end to end on a tiny model: each method trains in each seed at the
reference's env steps, a finished run's record is reused when asked for again (the
reference by every table, and after its run folder is gone, as in a later session), and the
table lands between its markers in the doc, replacing the one before it."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bake_off

SMALL = [
    "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2", "rollout.max_tokens=8",
    "eval.episodes=4", "eval.plays=1", "optim.minibatches=1", "optim.micro_batch_size=4",
]  # fmt: skip


def test_the_bake_off_trains_each_method_at_equal_env_steps_and_writes_its_table(
    tiny_model_dir, tmp_path, monkeypatch
):
    methods = dict(list(bake_off.TABLES["scale"].items())[:2])  # the recipe and the floor
    monkeypatch.setitem(bake_off.TABLES, "scale", methods)
    args = argparse.Namespace(seeds=2, steps=2, out=tmp_path / "runs", methods=None,
                              records=tmp_path / "records", model_long=str(tiny_model_dir),
                              overrides=SMALL)  # fmt: skip
    results = bake_off.bake(args, "scale", "long")
    reference, floor = (results[name] for name in methods)
    for ref, other in zip(reference, floor, strict=True):
        assert ref.updates == 2 and ref.start is not None and other.start is None
        assert other.env_steps >= ref.env_steps or other.updates == 4 * args.steps
        assert 0.0 <= other.least_valid <= 1.0
    run = tmp_path / "runs" / "long" / "scale-floor-0-5-seed1"
    config = (run / "config.json").read_text()
    assert '"scale": "floor"' in config and f'"max_env_steps": {int(ref.env_steps)}' in config

    record = json.loads((tmp_path / "records" / "long" / "scale-floor-0-5-seed1.json").read_text())
    assert "advantage.scale=floor" in record["overrides"] and len(record["settings"]) == 64
    assert record["result"]["items"] and all(
        0 <= v <= 1 for v in record["result"]["items"].values()
    )
    assert len(record["result"]["items"]) == 4  # eval.episodes, each its own item

    shutil.rmtree(tmp_path / "runs")  # a later session: only the records are left
    assert bake_off.bake(args, "scale", "long") == results  # reused, not trained again
    assert not (tmp_path / "runs").exists()
    calls = bake_off.bake(args, "calls", "long")  # another table: the same reference runs
    assert (
        calls["GiGPO"] == results["GiGPO"]
        and not (tmp_path / "runs" / "long" / "gigpo-seed0").exists()
    )
    assert [r.updates <= 4 * args.steps for r in calls["target_kl 0.05"]] == [True, True]

    doc = tmp_path / "which-method.md"
    doc.write_text("# Which method\n\nbefore\n\n<!-- bake-off scale long -->\nold\n"
                   "<!-- /bake-off -->\n\nafter\n")  # fmt: skip
    text = bake_off.markdown("scale", "long", results, "python bench/bake_off.py")
    bake_off.write(doc, "scale", "long", text)
    bake_off.write(doc, "scale", "long", text)
    page = doc.read_text()
    assert "old" not in page and page.count("| scale floor, 0.5 |") == 1
    assert page.startswith("# Which method\n\nbefore\n") and page.endswith("after\n")
    row = next(line for line in page.splitlines() if line.startswith("| scale floor, 0.5 |"))
    assert row.count("%") == 3  # two seeds' figures and their mean; the differences in points
    assert row.split(" | ")[4].count(";") == 1  # each seed's difference, paired item by item
    assert row.endswith(f"| {floor[0].updates}, {floor[1].updates} |")
    bake_off.write(doc, "estimators", "short", "a table")  # no markers yet: appended
    assert doc.read_text().endswith(
        "## Bake-off: estimators, short horizon\n\n<!-- bake-off estimators short -->\n"
        "a table\n\n<!-- /bake-off -->\n"
    )


def test_a_default_that_acts_on_nothing_in_a_run_keeps_its_record():
    """How process rewards join the advantage is no part of a run without any: its digest
    is the same whichever way they would join, so changing that default trains none of the
    recorded outcome-only runs again; a run with a process reward is told apart by it."""
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig

    def digest(*overrides):
        return bake_off.digest(load_config(TrainConfig, None, ["model=m", *overrides]))

    added = ["advantage.step_combine=add"]
    assert digest() == digest(*added) == digest(*added, "advantage.step_alpha=2")
    mc = f"rewards=[{{source: env}}, {bake_off.MC}]"
    assert digest(mc) != digest(mc, *added)
    assert digest() != digest("advantage.scale=none")
