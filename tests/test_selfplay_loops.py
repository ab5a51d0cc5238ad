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
from toolgym.training.config import TrainConfig
from toolgym.training.run import checkpoint

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
    (record,) = [m for m in trainer.run() if m["step"] == 1]
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    assert record["groups/untrained"] == len(trainer.trained[0]["groups"]) > 0
    assert record["groups/solver_groups/out_of_band"] >= 2
    assert not any(k.startswith("train/") for k in record)
    kept = read_jsonl(tmp_path / "rollouts" / "step_000001.jsonl")
    assert len(kept) >= 4  # whole groups: at least the episodes asked for
    assert all(t.untrained for t in kept)  # each says why it was played but not learned from


def test_a_running_baseline_reaches_the_proposers_advantages(tool_calling_model_dir, tmp_path):
    class Advantages(Recording):
        async def advantages(self, groups):
            self.groups_seen = groups
            self.seen = await super().advantages(groups)
            return self.seen

    trainer = Advantages(config(tool_calling_model_dir, tmp_path, "sql", "steps=1",
                                "selfplay.baseline=running"))  # fmt: skip
    (record,) = [m for m in trainer.run() if m["step"] == 1]
    (proposers,) = [g for g in trainer.groups_seen if g.group_id.endswith(":proposer")]
    rewards = [t.total_reward for t in proposers.trajectories if not t.masked]
    assert proposers.baseline == pytest.approx(sum(rewards) / len(rewards))  # the first mean
    kind = proposers.group_id.split(":")[1]  # "unknown" when no proposal could be read
    assert record[f"groups/proposer_baseline/{kind}"] == pytest.approx(proposers.baseline)
    advantage = {t.id: a[0] for t, a in zip(*trainer.seen, strict=True)}
    for t in proposers.trajectories:
        if not t.masked:
            assert advantage[t.id] == pytest.approx(t.total_reward - proposers.baseline)


@pytest.fixture(scope="module")
def maze_editor_dir(tool_calling_model_dir, tmp_path_factory):
    """The tool-calling model taught the maze proposer's first edit on a few mazes (the
    scripted proposer's), so its proposals are valid and get scored."""
    from conftest import built_once, teach
    from toolgym.agents.demonstrations import demonstrations
    from toolgym.agents.models.loading import load_model, load_tokenizer
    from toolgym.agents.render import ChatRenderer
    from toolgym.envs.maze import ProposeMazeEnv
    from toolgym.envs.tasks import TaskDraw

    def build(out):
        tokenizer = load_tokenizer(tool_calling_model_dir)
        draws = [TaskDraw("train", i, {}, i) for i in range(8)]
        demos = demonstrations(lambda: ProposeMazeEnv(size=3, n_doors=0, max_turns=1),
                               ChatRenderer(tokenizer), draws)  # fmt: skip
        turns = [(d.trajectory.token_ids, d.trajectory.steps[0]) for d in demos]
        examples = [(ids[: s.response_start], ids[s.response_start : s.response_end])
                    for ids, s in turns]  # fmt: skip
        teach(load_model(tool_calling_model_dir), tokenizer, examples, out, steps=300)

    return built_once(tmp_path_factory, "maze-editor-model", build)


@pytest.mark.parametrize("every", [0, 1])
def test_a_snapshot_scores_the_proposals_with_weights_of_its_own(every, maze_editor_dir, tmp_path):
    """selfplay.scorer: snapshot plays each valid task's scoring episodes with a copy of the
    policy: the start weights throughout (every 0), or those after 1 update from step 1 on
    (every 1); its groups are in the step's episodes, untrained. The policy is moved before
    the run (a fresh one's updates may be nil), so a copy that shared its weights would show;
    by 1e-4, not more: a CI run's editor moved by 0.01 wrote no valid proposal at all."""
    settings = ("steps=2", "rollouts_kept=64", "selfplay.scorer=snapshot",
                f"selfplay.snapshot_every={every}",
                "env.kwargs={size: 3, n_doors: 0, max_turns: 8}")  # fmt: skip
    trainer = Recording(config(maze_editor_dir, tmp_path, "maze", *settings))
    copy = trainer.snapshot.engine.model
    start = [p.detach().clone() for p in trainer.model.parameters()]
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(1e-4)
    after_first: list = []

    def keep(record):
        if record["step"] == 1:
            after_first.extend(p.detach().clone() for p in trainer.model.parameters())

    records = trainer.run(on_step=keep)

    def same(a, b):
        return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    assert not same(start, list(trainer.model.parameters()))
    assert same(list(copy.parameters()), start if every == 0 else after_first)
    assert trainer.snapshot.taken == (0 if every == 0 else 1)
    scoring = [g for step in trainer.trained for g in step["groups"] if g.endswith(":snapshot")]
    solved = [g for step in trainer.trained for g in step["groups"] if g.startswith("p")
              and g.endswith(":solver")]  # fmt: skip
    assert len(scoring) == len(solved) >= 1  # one scoring group per valid proposal
    assert sum(r["groups/untrained"] for r in records if r["step"] >= 1) == len(scoring)
    assert all(0 <= r["groups/snapshot_solve_rate"] <= 1 for r in records if r["step"] >= 1
               and "groups/snapshot_solve_rate" in r)  # fmt: skip
    kept = [t for f in sorted((tmp_path / "rollouts").glob("step_*.jsonl")) for t in read_jsonl(f)]
    assert sum(t.role == "snapshot" for t in kept) == 2 * len(scoring)  # 2 episodes a task
    assert len(kept) == sum(len(step["tokens"]) for step in trainer.trained)


def test_a_snapshot_is_refused_where_it_cannot_be_taken(tool_calling_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="snapshot_every is for scorer: snapshot"):
        config(tool_calling_model_dir, tmp_path, "sql", "selfplay.snapshot_every=2")
    with pytest.raises(ConfigError, match="needs mode: sync"):
        config(tool_calling_model_dir, tmp_path, "sql", "mode=async", "selfplay.scorer=snapshot",
               "selfplay.snapshot_every=2")  # fmt: skip
    served = config(tool_calling_model_dir, tmp_path, "sql", "selfplay.scorer=snapshot",
                    "engine.kind=openai", "engine.base_url=http://127.0.0.1:9/v1",
                    "lora.enabled=true")  # fmt: skip
    with pytest.raises(ConfigError, match="holds none here: use engine.kind=hf"):
        Recording(served)
