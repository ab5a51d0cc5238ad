"""The self-play builder's solver batch and repeats, its bookkeeping played step by step with a
scripted collector (the loop on a real model is test_selfplay_builder.py's): the solver
trains on `solver_groups` groups whatever the proposer managed, topped up from past
proposals before references; a task proposed twice in a step is a repeat that earns 0 and
is solved once; a task the pool holds already is valid and kept once."""

from __future__ import annotations

import asyncio

import pytest

from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.training.config import SelfPlaySection
from toolgym.training.groups.base import BuildContext
from toolgym.training.selfplay.builder import SelfPlay
from toolgym.training.selfplay.pool import TaskPool
from toolgym.training.selfplay.validation import Rules


class QuestionDomain:
    """Questions on named databases: one is another's repeat when both ask the same of the
    same database, whatever the case and punctuation."""

    name = "questions"
    proposer = EnvRef("propose", "fixture/ProposeMaze-v0")
    solver = EnvRef("solve", "toolgym/Maze-v0")

    def stages(self):
        return [("rules", Rules())]

    def solver_task(self, task):
        return {"db": task.check["db"], "question": task.instruction}

    def identity(self, task):
        return f"{task.check['db']}|{task.instruction.lower().strip(' ?')}"

    def references(self, k):
        return [question("reference", f"How many rows does table {i} hold?") for i in range(k)]


def question(db: str, text: str) -> ProposedTask:
    return ProposedTask(kind="sql", instruction=text, check={"db": db})


class Scripted:
    """Plays the step's proposer episode k as handing back `proposals[k]` (None: no task),
    and solves every task at the rate `solve_rate` gives its question."""

    def __init__(self, proposals, solve_rate=lambda question: 0.5, solvers=4):
        self.proposals, self.solve_rate, self.solvers = proposals, solve_rate, solvers
        self.solved: list[dict] = []

    async def __call__(self, requests):
        return [self.play(r) for r in requests]

    def play(self, request) -> TrajectoryGroup:
        task = request.draw.task
        if request.role == "proposer":
            proposed = self.proposals[int(task["proposal"][1:]) % len(self.proposals)]
            result = None if proposed is None else proposed.model_dump(mode="json")
            steps = [Step(0, 1, [0.0], "propose", [], 0.0, 0, 1, result=result)]
            return TrajectoryGroup("", None, [Trajectory(task["proposal"], steps=steps)])
        self.solved.append(task)
        wins = round(self.solve_rate(task["question"]) * request.size)
        episodes = [
            Trajectory(f"{request.group_id}:{i}",
                       steps=[Step(0, 1, [0.0], "answer", [], float(i < wins), 0, 1)])
            for i in range(request.size)
        ]  # fmt: skip
        return TrajectoryGroup(request.group_id, None, episodes)


def selfplay(proposals: int, solver_groups: int, pool: TaskPool, frozen=(), band=None) -> SelfPlay:
    settings = SelfPlaySection.model_construct(
        domain="questions", proposals=proposals, shown=0, reward="learnability",
        invalid_penalty=-0.5, format_penalty=-1.0, solver_groups=solver_groups, readers=1,
        frozen=list(frozen), solver_band=band,
    )  # fmt: skip
    return SelfPlay(QuestionDomain(), pool, settings, solvers=4)


def step(builder: SelfPlay, collect: Scripted, number: int) -> list[TrajectoryGroup]:
    ctx = BuildContext(step=number, policy_version=number, groups=8, collect=collect)
    return asyncio.run(builder.build(ctx))


def rewards(groups: list[TrajectoryGroup]) -> list[float]:
    proposers = [t for g in groups if g.group_id.endswith(":proposer") for t in g.trajectories]
    return [t.scores["proposer"] for t in sorted(proposers, key=lambda t: int(t.id[1:]))]


def test_a_step_whose_proposals_fail_still_trains_the_solver_on_its_whole_batch():
    references = QuestionDomain().references(2)
    builder = selfplay(proposals=4, solver_groups=6, pool=TaskPool(references))
    # step 0: one valid question of four (two hand back nothing, one is too short)
    first = Scripted([question("shop", "How many orders came from Lyon?"), None,
                      question("shop", "Hm?"), None])  # fmt: skip
    groups = step(builder, first, 0)
    solvers = [g.group_id for g in groups if g.group_id.endswith(":solver")]
    assert len(solvers) == 6  # 1 proposed + 5 topped up: not 1 + a floor of 2
    assert solvers[0] == "p0:solver"
    # the pool's one past proposal does not exist yet (it joins after the step): references
    assert solvers[1:] == [f"s0.reference{k}:solver" for k in range(5)]
    for g in groups:  # named when asked for, not renamed after: its episodes carry the name
        if g.group_id.endswith(":solver"):
            assert all(t.id.startswith(f"{g.group_id}:") for t in g.trajectories)
    metrics = builder.last_metrics
    assert (metrics["solver_groups/proposed"], metrics["solver_groups/pool"],
            metrics["solver_groups/reference"]) == (1, 0, 5)  # fmt: skip
    # step 1: nothing valid; the batch is the pool's proposal first, newest first
    second = Scripted([None] * 4)
    groups = step(builder, second, 1)
    assert [t["question"] for t in second.solved][:3] == [
        "How many orders came from Lyon?",
        *(r.instruction for r in references),
    ]
    assert builder.last_metrics["solver_groups/pool"] >= 1
    assert sum(g.group_id.endswith(":solver") for g in groups) == 6


def test_a_repeat_within_the_step_earns_nothing_and_is_solved_once():
    builder = selfplay(proposals=5, solver_groups=0, pool=TaskPool([]))
    scripted = Scripted([
        question("shop", "How many orders came from Lyon?"),
        question("shop", "how many orders came from lyon"),  # the same task
        question("school", "How many orders came from Lyon?"),  # another database
        question("shop", "<tool_call>{\"name\": \"x\"}</tool_call>"),  # refused: the penalty
        None,  # nothing readable: the format penalty
    ])  # fmt: skip
    groups = step(builder, scripted, 0)
    # learnability of 2/4, a repeat's 0, a refused task's -0.5, an unreadable one's -1
    assert rewards(groups) == [0.5, 0.0, 0.5, -0.5, -1.0]
    assert [(t["db"], t["question"]) for t in scripted.solved] == [
        ("shop", "How many orders came from Lyon?"),
        ("school", "How many orders came from Lyon?"),
    ]
    assert builder.last_metrics["rejected/repeat"] == 0.2
    assert len(builder.pool.proposed) == 2


def test_a_task_the_pool_holds_is_valid_and_kept_once():
    builder = selfplay(proposals=2, solver_groups=0, pool=TaskPool([]))
    asked = question("shop", "How many orders came from Lyon?")
    step(builder, Scripted([asked, question("shop", "Which city ordered most?")]), 0)
    again = Scripted([asked, question("shop", "Which city ordered least?")])
    groups = step(builder, again, 1)
    assert rewards(groups) == [0.5, 0.5]  # asked before: history is not a penalty
    assert len(again.solved) == 2 and builder.last_metrics["pool_repeats"] == 1
    assert [t.instruction for t in builder.pool.proposed] == [
        "How many orders came from Lyon?",
        "Which city ordered most?",
        "Which city ordered least?",
    ]


@pytest.mark.parametrize("frozen", ["proposer", "solver"])
def test_a_frozen_role_is_played_but_not_trained(frozen):
    pool = TaskPool(QuestionDomain().references(2))
    builder = selfplay(proposals=2, solver_groups=3, pool=pool, frozen=[frozen])
    scripted = Scripted([question("shop", "How many orders came from Lyon?"), None])
    groups = step(builder, scripted, 0)
    trained = {g.group_id.rsplit(":", 1)[1] for g in groups if g.untrained is None}
    assert trained == {"proposer", "solver"} - {frozen}
    kept_out = [g for g in groups if g.untrained is not None]
    assert kept_out and all(g.group_id.endswith(f":{frozen}") for g in kept_out)
    assert all(g.untrained == f"the {frozen} is frozen (selfplay.frozen)" for g in kept_out)
    assert len(scripted.solved) == 3  # the solvers still play: they score the proposal
    assert builder.last_metrics["solver_groups/proposed"] == 1


def test_the_band_keeps_solver_groups_outside_it_out_of_the_update():
    rates = {"How many orders came from Lyon?": 0.25, "Which city ordered most?": 0.5,
             "Which city ordered least?": 1.0}  # fmt: skip
    builder = selfplay(proposals=3, solver_groups=0, pool=TaskPool([]), band=(0.3, 0.8))
    scripted = Scripted([question("shop", q) for q in rates], solve_rate=rates.__getitem__)
    groups = step(builder, scripted, 0)
    solvers = {g.group_id: g.untrained for g in groups if g.group_id.endswith(":solver")}
    assert solvers == {
        "p0:solver": "its solve rate 0.25 is outside [0.3, 0.8]",
        "p1:solver": None,
        "p2:solver": "its solve rate 1.00 is outside [0.3, 0.8]",
    }
    assert builder.last_metrics["solver_groups/out_of_band"] == 2
    # the filtered tasks still score their proposers (learnability of 1/4, 2/4, 4/4)
    assert rewards(groups) == [0.75, 0.5, 0.0]


class Snapshot:
    """A scorer whose episodes solve every question at `rate` (the trained solvers' differ)."""

    def __init__(self, rate: float) -> None:
        self.played = Scripted([None], solve_rate=lambda question: rate)
        self.steps: list[int] = []

    def collect_for(self, step: int):
        self.steps.append(step)
        return self.played


def test_a_snapshot_scorer_pays_the_proposers_and_its_episodes_are_kept_out_of_the_update():
    """R-Zero's fixed solver: the proposer is paid from the snapshot's solve rate (1/4 ->
    learnability 0.75), not the trained solvers' (1/2 -> 0.5); the snapshot's groups are
    handed on untrained, so the step's rollouts and env steps hold them."""
    settings = SelfPlaySection.model_construct(
        domain="questions", proposals=2, shown=0, reward="learnability", invalid_penalty=-0.5,
        format_penalty=-1.0, solver_groups=3, readers=1, frozen=[], solver_band=None,
        scorer="snapshot",
    )  # fmt: skip
    snapshot = Snapshot(0.25)
    builder = SelfPlay(QuestionDomain(), TaskPool(QuestionDomain().references(2)), settings,
                       solvers=4, scorer=snapshot)  # fmt: skip
    scripted = Scripted([question("shop", "How many orders came from Lyon?"), None])
    groups = step(builder, scripted, 3)
    assert rewards(groups) == [0.75, -1.0]
    assert snapshot.steps == [3]
    assert [t["question"] for t in snapshot.played.solved] == ["How many orders came from Lyon?"]
    scoring = [g for g in groups if g.group_id.endswith(":snapshot")]
    assert [g.group_id for g in scoring] == ["p0:snapshot"]
    assert scoring[0].untrained == "it scores its proposal (selfplay.scorer: snapshot)"
    assert len(scoring[0].trajectories) == 4
    trained = [g.group_id for g in groups if g.untrained is None]
    assert sorted(trained) == ["p0:solver", "s3.reference0:solver", "s3.reference1:solver",
                               "s3:sql:proposer"]  # fmt: skip
    assert builder.last_metrics["snapshot_solve_rate"] == 0.25
    assert builder.last_metrics["solve_rate"] == 0.5


def test_a_step_with_nothing_in_band_and_a_frozen_proposer_hands_on_its_groups_untrained(caplog):
    builder = selfplay(proposals=2, solver_groups=0, pool=TaskPool([]), frozen=["proposer"],
                       band=(0.3, 0.8))  # fmt: skip
    scripted = Scripted([question("shop", "How many orders came from Lyon?"), None],
                        solve_rate=lambda q: 0.0)  # fmt: skip
    groups = step(builder, scripted, 0)
    assert groups and all(g.untrained for g in groups)  # played and kept, not dropped
    assert "trains on nothing" in caplog.text


def test_a_band_outside_zero_to_one_is_refused():
    from toolgym.config import load_config
    from toolgym.errors import ConfigError
    from toolgym.training.config import TrainConfig

    for band in ("[0.8, 0.3]", "[-0.1, 0.5]", "[0.2, 1.5]"):
        with pytest.raises(ConfigError, match="solver_band"):
            load_config(
                TrainConfig, None, ["model=x", f"selfplay={{domain: sql, solver_band: {band}}}"]
            )
    settings = load_config(
        TrainConfig, None, ["model=x", "selfplay={domain: sql, solver_band: [0.3, 0.8]}"]
    )
    assert settings.selfplay is not None and settings.selfplay.solver_band == (0.3, 0.8)


def test_both_roles_frozen_is_refused_before_anything_runs():
    from toolgym.config import load_config
    from toolgym.errors import ConfigError
    from toolgym.training.config import TrainConfig

    with pytest.raises(ConfigError, match="freeze one role at most"):
        load_config(
            TrainConfig, None, ["model=x", "selfplay={domain: sql, frozen: [proposer, solver]}"]
        )
    with pytest.raises(ConfigError, match="frozen"):
        load_config(TrainConfig, None, ["model=x", "selfplay={domain: sql, frozen: [judge]}"])


def test_no_proposals_trains_the_solver_on_the_references_alone():
    """`selfplay.proposals: 0`, the references-only arm of an ablation: no proposer plays, and
    the solver's whole batch is the references, step after step."""
    references = QuestionDomain().references(3)
    builder = selfplay(proposals=0, solver_groups=6, pool=TaskPool(references))
    collect = Scripted([None])
    for number in range(2):
        groups = step(builder, collect, number)
        assert all(g.group_id.endswith(":solver") for g in groups) and len(groups) == 6
        assert builder.last_metrics["solver_groups/reference"] == 6
    assert {t["question"] for t in collect.solved} == {r.instruction for r in references}


def test_the_step_logs_its_solver_groups_by_solve_rate_and_the_proposers_token_share():
    references = QuestionDomain().references(1)
    builder = selfplay(proposals=2, solver_groups=4, pool=TaskPool(references))
    rates = {"How many orders came from Lyon?": 0.5, "How many orders came from Oslo?": 1.0}
    collect = Scripted([question("shop", q) for q in rates], lambda q: rates.get(q, 0.0))
    groups = step(builder, collect, 0)
    m = builder.last_metrics
    # two proposals (p = 0.5 and 1) and two references (p = 0)
    assert (m["solver_rates/none"], m["solver_rates/some"], m["solver_rates/all"]) == (
        0.5,
        0.25,
        0.25,
    )
    tokens = {role: sum(t.generated_tokens for g in groups for t in g.trajectories
                        if g.group_id.endswith(role)) for role in (":proposer", ":solver")}  # fmt: skip
    assert m["proposer_token_share"] == pytest.approx(
        tokens[":proposer"] / (tokens[":proposer"] + tokens[":solver"])
    )


def test_a_restored_pool_keeps_only_the_tasks_its_domain_can_hand_a_solver(caplog):
    """A checkpoint's pool comes from outside the process: a task the domain cannot read (no
    database named) is dropped with a warning, not met as a KeyError at every top-up."""
    builder = selfplay(proposals=0, solver_groups=3, pool=TaskPool([]))
    good = question("shop", "How many orders came from Lyon?")
    broken = ProposedTask(kind="sql", instruction="Which database am I on?", check={})
    builder.load_state_dict({"pool": {"proposed": [good.model_dump(), broken.model_dump()]}})
    assert builder.pool.proposed == [good]
    assert "1 task(s) of the restored pool dropped" in caplog.text and "KeyError" in caplog.text
    collect = Scripted([None])
    step(builder, collect, 0)
    assert {t["question"] for t in collect.solved} == {good.instruction}
