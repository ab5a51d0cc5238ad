"""A run launched as several processes (torchrun, gloo on CPU): the ranks shard the weights
with FSDP2 and train on shares of each batch, and the losses are one process's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import FIXTURES, ROOT
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.builders import check_distributed
from toolgym.training.config import TrainConfig
from toolgym.training.distributed import Ranks, join, micro_batches
from toolgym.training.run import checkpoint
from toolgym.training.trainer import Trainer
from toolgym.training.update.batch import TokenBatch
from toolgym.training.update.learner import Leader

RECIPE = ROOT / "configs" / "maze_gigpo.yaml"
# a KL term (a sharded reference) and the decoupled loss (proximal log-probabilities scored
# rank by rank); 16 trajectories a mini-batch in micro-batches of 5 rows per rank
SETTINGS = [
    "rollout.tasks_per_step=8", "optim.minibatches=2", "optim.micro_batch_size=5",
    "loss.kl_coef=0.01", "loss.mode=decoupled", "eval.episodes=8", "eval.plays=1",
    "eval.at_start=false", "tensorboard=false",
]  # fmt: skip
TOLERANCE = 1e-4
"""Relative, for the first step: the ranks sum their shares of a gradient in another order
than one process does."""
DRIFT = 2e-2
"""Relative, for later steps: AdamW scales every gradient to a step of about lr, so a
gradient that sums to nearly zero, whose sign the summation order can flip, moves its weight
as far as any other; the weights drift apart a little with each update (0.2% in a gradient
norm after one step on one CI machine, under 0.01% on another). That the optimizer states
survive a resume exactly is checked on its own, below."""
RESUMED = 0.25
"""Relative, for the gradient norm of the step one process trains after the ranks' two: two
updates' drift, which the loss (a sum of signed terms near zero) magnifies too much to
compare. On one run its loss was 17% off and its gradient norm 8%, on episodes with the same
success. That shards load exactly is checked on its own, below; this step shows that one
process trains on from them."""


def run_ranks(n: int, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`toolgym ARGS` as `n` processes started by torchrun on this machine."""
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return subprocess.run(
        [*command, f"--nproc-per-node={n}", "-m", "toolgym", *args],
        capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def losses(run_dir: Path) -> dict[int, tuple[float, float, float]]:
    """Each step's loss, gradient norm and rollout success."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {
        r["step"]: (r["train/loss"], r["train/grad_norm"], r["rollout/success"])
        for r in rows
        if "train/loss" in r
    }


def close(a: tuple[float, ...], b: tuple[float, ...], step: int) -> bool:
    rel = TOLERANCE if step == 1 else DRIFT
    return all(x == pytest.approx(y, rel=rel, abs=1e-6) for x, y in zip(a, b, strict=True))


@pytest.mark.timeout(1200)  # with the quickstart it starts from, when it runs first
def test_two_ranks_train_as_one_process_and_one_process_resumes_their_shards(
    quickstart_run, tmp_path
):
    model = quickstart_run[0] / "sft"
    one = tmp_path / "one"
    config = load_config(
        TrainConfig, RECIPE, [f"model={model}", f"run_dir={one}", "steps=3", *SETTINGS]
    )
    Trainer(config).run()
    expected = losses(one)

    two = tmp_path / "two"
    done = run_ranks(
        2, "train", "--config", str(RECIPE), f"model={model}", f"run_dir={two}", "steps=1",
        *SETTINGS,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("finished") == 1  # the leader reports
    assert done.stdout.count(f"run {two}: training") == 1  # and names the run, once
    assert len(re.findall(r"^step 1/1  success", done.stdout, re.M)) == 1
    # two ranks resume from the shards two ranks wrote (the run is lengthened by a step)
    saved = json.loads((two / "config.json").read_text())
    (two / "config.json").write_text(json.dumps({**saved, "steps": 2}))
    done = run_ranks(2, "train", "--resume", str(two))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trained = losses(two)
    assert sorted(trained) == [1, 2]
    for step in (1, 2):  # same episodes, same losses and gradient norms
        assert close(trained[step], expected[step], step), (step, trained[step], expected[step])
    state = checkpoint.read(two / checkpoint.FILE)
    assert state["step"] == 2 and state["shards"] == "checkpoint_shards/step-2"
    assert "model" not in state and (two / state["shards"] / ".metadata").is_file()
    assert [p.name for p in (two / checkpoint.SHARDS).iterdir()] == ["step-2"]  # older pruned
    assert (two / "policy" / "model.safetensors").is_file()

    # one process reads the shards two ranks wrote and trains the third step as the
    # uninterrupted run did
    config = load_config(
        TrainConfig, RECIPE, [f"model={model}", f"run_dir={two}", "steps=3", *SETTINGS]
    )
    Trainer(config).run(resume=True)
    resumed = losses(two)
    assert sorted(resumed) == [1, 2, 3]
    assert resumed[3][1] == pytest.approx(expected[3][1], rel=RESUMED), (resumed, expected)


def test_each_rank_gets_its_share_of_every_micro_batch_and_as_many_passes():
    n = 13
    batch = TokenBatch(
        torch.arange(n)[:, None].repeat(1, 4), torch.ones(n, 4, dtype=torch.long),
        torch.ones(n, 3), torch.zeros(n, 3), torch.zeros(n, 3),
    )  # fmt: skip
    shares = [list(micro_batches(batch, Ranks(rank, 2, None), size=3)) for rank in (0, 1)]
    assert [len(s) for s in shares] == [3, 3]  # chunks of 6, 6 and 1 rows
    counted = sorted(row for s in shares for rows, _, counts in s if counts for row in rows)
    assert counted == list(range(n))  # every row once, on one rank
    assert [counts for _, _, counts in shares[1]] == [True, True, False]  # rank 1 is short
    rows, micro, _ = shares[1][2]
    assert rows == [12] and micro.input_ids[:, 0].tolist() == [12]  # a copy, weighed zero
    assert [r for r, _, _ in shares[0]] == [[0, 2, 4], [6, 8, 10], [12]]  # dealt in turn


def test_what_a_distributed_run_cannot_do_is_refused_before_anything_loads(tmp_path):
    lora = load_config(TrainConfig, None, ["model=m", "lora.enabled=true", f"run_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="train a LoRA adapter in one process"):
        check_distributed(lora)
    snapshot = load_config(TrainConfig, None, [
        "model=m", f"run_dir={tmp_path}", "env.id=toolgym/Maze-v0",
        "selfplay={domain: maze, scorer: snapshot}"])  # fmt: skip
    with pytest.raises(ConfigError, match="a distributed run shards it"):
        check_distributed(snapshot)
    with pytest.raises(ConfigError, match="torchrun --nproc-per-node N"):
        join("cpu", 10)  # not started by a launcher
    one_process = {"step": 1, "model": {}, "optimizer": {}, "rng": {}}
    with pytest.raises(checkpoint.CheckpointError, match="resume it in one process"):
        Leader(None, Ranks(0, 2, None)).restore(tmp_path, one_process)  # type: ignore[arg-type]


def test_without_ray_the_ray_setting_says_how_to_install_it(monkeypatch):
    from toolgym.agents.ray.cluster import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"install it with: pip install 'toolgym\[dist\]'"):
        import_ray()


def test_shards_give_back_the_weights_and_optimizer_states_they_were_written_from(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    for _ in range(2):  # moments and a step count that a fresh optimizer lacks
        model(torch.randn(3, 4)).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    name = checkpoint.save_shards(tmp_path, 2, model, optimizer)

    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    state = {"step": 2, "shards": name, "rng": {}}
    checkpoint.restore_weights(tmp_path, state, fresh, fresh_optimizer)
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    saved, restored = optimizer.state_dict()["state"], fresh_optimizer.state_dict()["state"]
    assert sorted(saved) == sorted(restored) == [0, 1, 2, 3]
    for key in saved:
        for field in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(saved[key][field], restored[key][field]), (key, field)


def test_damaged_shards_stop_a_resume_with_one_line_naming_their_folder(tmp_path):
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.AdamW(model.parameters())
    name = checkpoint.save_shards(tmp_path, 3, model, optimizer)
    folder = tmp_path / name
    shard = next(folder.glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:100])  # truncated on a bad disk
    state = {"step": 3, "shards": name, "rng": {}}
    with pytest.raises(checkpoint.CheckpointError, match="step-3: its shards cannot be read"):
        checkpoint.restore_weights(tmp_path, state, model, optimizer)
    (folder / ".metadata").unlink()
    with pytest.raises(checkpoint.CheckpointError, match=r"no complete shards there"):
        checkpoint.restore_weights(tmp_path, state, model, optimizer)
