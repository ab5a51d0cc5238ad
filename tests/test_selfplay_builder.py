"""The self-play builder's whole loop on a tiny model: proposals read and validated, valid
tasks solved, the proposer rewarded by its solvers, both roles trained in the same step,
hostile proposals rejected with their reason, and the task pool kept across a resume."""

from __future__ import annotations

from test_async_training import Recording, config

import fixture_envs  # noqa: F401 (registers fixture/ProposeMaze-v0)
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.training.config import SelfPlaySection
from toolgym.training.run import checkpoint
from toolgym.training.selfplay.builder import SelfPlay
from toolgym.training.selfplay.pool import TaskPool
from toolgym.training.selfplay.validation import Rules

MAZE_SELFPLAY = SelfPlaySection.model_construct(domain="maze", proposals=4, solver_groups=2)
"""The section for a domain of this test's own, which the registry of choices does not hold."""


class MazeDomain:
    name = "maze"

    def __init__(self, solver: EnvRef, hostile: bool = False) -> None:
        self.solver = solver
        self.proposer = EnvRef("propose-maze", "fixture/ProposeMaze-v0", {"hostile": hostile})

    def stages(self):
        return [("rules", Rules())]

    def solver_task(self, task):
        return {"seed": int(task.check["seed"])}

    def identity(self, task):
        return str(task.check["seed"])


REFERENCES = [
    ProposedTask(kind="maze", instruction=f"Reach the goal of reference maze {n}.",
                 check={"seed": 900 + n})
    for n in range(2)
]  # fmt: skip


def builder(settings, hostile=False):
    domain = MazeDomain(settings.mixture[0].ref, hostile)
    return SelfPlay(domain, TaskPool(REFERENCES, seed=settings.seed),
                    MAZE_SELFPLAY, solvers=2)  # fmt: skip


def test_proposals_are_validated_solved_and_both_roles_train_in_one_step(
    tool_calling_model_dir, tmp_path
):
    settings = config(tool_calling_model_dir, tmp_path, "steps=2")
    selfplay = builder(settings, hostile=True)
    trainer = Recording(settings, groups=selfplay)
    metrics = trainer.run()
    for step in trainer.trained:
        ids = step["groups"]
        assert any(i.endswith(":proposer") for i in ids) and any(i.endswith(":solver") for i in ids)
    ids = [i for step in trainer.trained for i in step["groups"]]
    assert len(ids) == len(set(ids))
    # proposals 1, 2 and 3 of every 4 are hostile: markup, 50,000 characters, not a task
    assert all(m["groups/valid"] <= 0.25 for m in metrics)
    assert all(m["groups/rejected/format"] == 0.5 and m["groups/rejected/rules"] == 0.25
               for m in metrics)  # fmt: skip
    assert all(m["groups/pool"] >= 2 for m in metrics)


def test_a_resumed_run_keeps_its_task_pool(tool_calling_model_dir, tmp_path):
    first = builder(config(tool_calling_model_dir, tmp_path, "steps=1"))
    Recording(config(tool_calling_model_dir, tmp_path, "steps=1"), groups=first).run()
    saved = checkpoint.read(tmp_path / checkpoint.FILE)["extra"]["groups"]
    assert saved["proposed"] == 4 and saved["pool"] == first.pool.state_dict()
    again = builder(config(tool_calling_model_dir, tmp_path, "steps=2"))
    Recording(config(tool_calling_model_dir, tmp_path, "steps=2"), groups=again).run(resume=True)
    assert again.pool.proposed[: len(first.pool.proposed)] == first.pool.proposed
    assert again.proposed == 8
