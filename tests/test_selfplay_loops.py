"""Self-play's whole loop on each real domain, from the config a user writes (`selfplay:`):
proposer episodes on ProposeSQL-v0 / EditSQL-v0 / ProposeCode-v0 (sandbox) / ProposeSearch-v0 /
ProposeTextWorld-v0 (games built by TextWorld) / ProposeMaze-v0 (edits), their tasks
read and validated in stages (search's grounding plays reader episodes), solver groups on the
run's env, both roles in the same update, the builder's metrics logged; a run killed after a
step resumes with its task pool and counters intact.

The policy is the suite's tiny tool-calling model, so most proposals fail early stages (which
is what a fresh policy does); the pool's references keep solver groups in every step. Each
stage's verdicts on real proposals are checked in test_selfplay_{sql,sql_edit,code,search,textworld,maze}.py, and
learning is bench/selfplay.py's to measure."""

from __future__ import annotations

import pytest
import torch
from test_async_training import Recording

from toolgym.agents.trajectory import read_jsonl
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training import checkpoint
from toolgym.training.config import TrainConfig

pytestmark = pytest.mark.timeout(600)

DOMAINS = {
    "sql": ["env.id=toolgym/SQL-v0", "env.kwargs={sample_rows: 0, max_turns: 2}"],
    "sql_edit": ["env.id=toolgym/SQL-v0", "env.kwargs={sample_rows: 0, max_turns: 2}"],
    "code": ["env.id=toolgym/CodeReason-v0", "env.kwargs={max_turns: 1}"],
    "search": ["env.id=toolgym/Search-v0", "env.kwargs={hops: 1, topk: 1, max_turns: 2}"],
    "textworld": ["env.id=toolgym/TextWorld-v0", "env.kwargs={max_turns: 2}"],
    "maze": ["env.id=toolgym/Maze-v0", "env.kwargs={size: 3, n_doors: 0, max_turns: 2}"],
}


def config(model, run_dir, domain, *extra):
    return load_config(
        TrainConfig, None,
        [f"model={model}", f"run_dir={run_dir}", "tensorboard=false", "eval.every_steps=10",
         "eval.episodes=2", "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2",
         "rollout.max_tokens=24", "optim.micro_batch_size=2", *DOMAINS[domain],
         f"selfplay={{domain: {domain}, proposals: 3, references: 2, solver_groups: 2, "
         "proposer: {max_turns: 1}}", *extra],
    )  # fmt: skip


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_the_loop_runs_on_each_domain_and_trains_both_roles_in_one_step(
    domain, tool_calling_model_dir, tmp_path
):
    trainer = Recording(config(tool_calling_model_dir, tmp_path, domain, "steps=2"))
    metrics = trainer.run()
    assert len(trainer.trained) == 2
    for step in trainer.trained:
        roles = {i.rsplit(":", 1)[1] for i in step["groups"]}
        assert roles == {"proposer", "solver"}, step["groups"]
    for m in metrics:
        rejected = sum(v for k, v in m.items() if k.startswith("groups/rejected/"))
        assert m["groups/valid"] + rejected == pytest.approx(1.0)
        assert m["groups/pool"] >= 2


def test_a_killed_run_resumes_with_its_pool_and_counters(tool_calling_model_dir, tmp_path):
    first = Recording(config(tool_calling_model_dir, tmp_path, "sql", "steps=1"))
    first.run()
    saved = checkpoint.read(tmp_path / checkpoint.FILE)["extra"]["groups"]
    assert saved["proposed"] == 3 and saved["solved"] >= 2
    again = Recording(config(tool_calling_model_dir, tmp_path, "sql", "steps=2"))
    again.run(resume=True)
    assert again.groups.proposed == 6
    assert (
        again.groups.pool.state_dict()["proposed"][: len(saved["pool"]["proposed"])]
        == (saved["pool"]["proposed"])
    )
    ids = {i for step in again.trained for i in step["groups"]}
    assert not ids & set(first.trained[0]["groups"])  # no group of step 0 is played again


def test_the_config_names_what_is_wrong(tool_calling_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="band"):
        config(tool_calling_model_dir, tmp_path, "sql", "selfplay.reward=band(0.2)")
    with pytest.raises(ConfigError, match="Did you mean: sql"):
        config(tool_calling_model_dir, tmp_path, "sql", "selfplay.domain=sq")


def test_self_play_streams_in_async_mode(tool_calling_model_dir, tmp_path):
    """A self-play step is one unit of the stream: proposed, solved and trained within eta."""
    trainer = Recording(config(tool_calling_model_dir, tmp_path, "sql", "steps=3", "mode=async"))
    metrics = trainer.run()
    assert len(trainer.trained) == 3 and all(
        m["async/staleness_0"] + m.get("async/staleness_1", 0) == 1.0 for m in metrics
    )
    for step in trainer.trained:
        assert {i.rsplit(":", 1)[1] for i in step["groups"]} == {"proposer", "solver"}
        assert max(step["lags"]) <= 1


def test_a_step_whose_groups_are_all_kept_out_plays_logs_and_changes_no_weight(
    tool_calling_model_dir, tmp_path
):
    """A frozen proposer and a band no solve rate of 2 episodes (0, 0.5, 1) falls in: the
    step is played and logged, its groups marked untrained, and the update skipped."""
    settings = ("steps=1", "rollouts_kept=4", "selfplay.frozen=[proposer]",
                "selfplay.solver_band=[0.6, 0.9]")  # fmt: skip
    trainer = Recording(config(tool_calling_model_dir, tmp_path, "sql", *settings))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    (record,) = [m for m in trainer.run() if m["step"] == 0]
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    assert record["groups/untrained"] == len(trainer.trained[0]["groups"]) > 0
    assert record["groups/solver_groups/out_of_band"] >= 2
    assert not any(k.startswith("train/") for k in record)
    assert len(read_jsonl(tmp_path / "rollouts" / "step_000000.jsonl")) == 4  # episodes kept


def test_a_running_baseline_reaches_the_proposers_advantages(tool_calling_model_dir, tmp_path):
    class Advantages(Recording):
        async def advantages(self, groups):
            self.groups_seen = groups
            self.seen = await super().advantages(groups)
            return self.seen

    trainer = Advantages(config(tool_calling_model_dir, tmp_path, "sql", "steps=1",
                                "selfplay.baseline=running"))  # fmt: skip
    (record,) = [m for m in trainer.run() if m["step"] == 0]
    (proposers,) = [g for g in trainer.groups_seen if g.group_id.endswith(":proposer")]
    rewards = [t.total_reward for t in proposers.trajectories if not t.masked]
    assert proposers.baseline == pytest.approx(sum(rewards) / len(rewards))  # the first mean
    kind = proposers.group_id.split(":")[1]  # "unknown" when no proposal could be read
    assert record[f"groups/proposer_baseline/{kind}"] == pytest.approx(proposers.baseline)
    advantage = {t.id: a[0] for t, a in zip(*trainer.seen, strict=True)}
    for t in proposers.trajectories:
        if not t.masked:
            assert advantage[t.id] == pytest.approx(t.total_reward - proposers.baseline)
