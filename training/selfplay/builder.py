"""The self-play group builder: one policy proposes tasks and solves them, in one step.

A step:
  1. `proposals` proposer episodes on the domain's proposer env, each shown `shown` tasks
     drawn from the pool for it (its reset task carries them, as JSON, under "examples";
     the proposer env shows each with its solution: a gold query, an answer, outputs).
  2. Each episode's task is read (the format stage) and run through the domain's stages,
     cheapest first, then its grounding (reader episodes, for a domain that GroundsTasks);
     a rejection keeps its stage and reason. A task the step already proposed (the same
     `identity`, the domain's: for SQL its database and question) is a repeat: not solved
     again, and it earns 0, not the penalty (a repeat is a valid task; a proposer that writes
     the skill's questions well must not be pushed off them).
  3. Each valid task gets `solvers` episodes on the domain's solver env: a group of its own,
     id `{proposer's trajectory id}:solver`. Fewer than `solver_groups` valid tasks, and the
     pool tops the batch up (`s{step}.pool{k}:solver`, `s{step}.reference{k}:solver`).
  4. A proposer's reward is its rule's (proposer_rules.py) from its task's solve rate,
     recorded as its episode's `proposer` score (the reward source of that name gives it to
     the last step, beside the env's own rewards): the
     solvers' training episodes score it, no extra rollouts; with `scorer: snapshot`, as
     many episodes by a frozen copy of the policy do (training/selfplay/snapshot.py), handed on
     untrained as `{proposer's trajectory id}:snapshot`. A task refused by a stage earns
     `invalid_penalty`, one that could not be read `format_penalty` (Absolute Zero's -0.5
     and -1); a proposal whose solvers all failed to run is masked (unknown).
     Proposals are one group per task kind, id `s{step}:{kind}:proposer`, so the group's
     normalisation is the per-(env, role, kind) baseline. A proposal alone in its group
     would have none (plain REINFORCE, or advantage 0): the step warns when a kind has one.
     With `baseline: running` the group carries the kind's running mean reward instead
     (SPIRAL's role-conditioned advantage), and the advantage is each reward less it.
  5. Valid tasks join the pool (saved in the checkpoint with the builder's state), those it
     holds already (by identity) once only.
  6. The step trains on both roles' groups, less a role `frozen` names (an ablation: the
     role is played as before, its episodes are not trained on) and, with a `solver_band`,
     the solver groups whose solve rate lies outside it (R-Zero's filter). Groups kept out
     are handed on marked `untrained`, so the step's rollouts and metrics still hold them.

A domain (`SelfPlayDomain`) names the two envs, its validation stages and how a task becomes
the solver env's reset task. Everything a proposal holds is hostile: it is bounded when read
and checked before any solver sees it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from toolgym.agents.collector import GroupRequest
from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks import TaskDraw
from toolgym.envs.tasks.proposed import ProposedTask, Provenance
from toolgym.log import get_logger
from toolgym.training.config import SelfPlaySection
from toolgym.training.groups.base import BuildContext, Collect
from toolgym.training.selfplay.pool import TaskPool
from toolgym.training.selfplay.proposer_rules import PROPOSER, proposer_rule
from toolgym.training.selfplay.validation import (
    FORMAT,
    Proposal,
    Stage,
    read_task,
    validate,
)

log = get_logger(__name__)
REPEAT = "repeat"
"""The stage of a proposal that repeats a task proposed earlier in its step."""


def solve_rate(solvers: TrajectoryGroup) -> float | None:
    """The share of a group's episodes that ran and solved the task; None when none ran."""
    ran = [t for t in solvers.trajectories if not t.masked]
    return sum(t.success for t in ran) / len(ran) if ran else None


class SelfPlayDomain(Protocol):
    name: str
    proposer: EnvRef
    solver: EnvRef

    def stages(self) -> list[tuple[str, Stage]]:
        """The domain's validation stages, cheapest first (rules, execution, grounding)."""
        ...

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        """The solver env's reset task for `task` (its "seed" field, if any, seeds the reset)."""
        ...

    def references(self, k: int) -> list[ProposedTask]:
        """k reference tasks of the domain's own, to seed the pool."""
        ...

    def identity(self, task: ProposedTask) -> str:
        """What makes two tasks one (for SQL: the database and the question's text)."""
        ...


@runtime_checkable
class GroundsTasks(Protocol):
    """A domain whose tasks must be answerable from their proposer's own evidence (search):
    after the domain's stages, each surviving task gets reader episodes on the solver env
    (its reset task from `grounding_tasks`), and `grounded` says from their group whether
    the task stands. Readers are not trained; a step's are played together."""

    def grounding_tasks(self, tasks: Sequence[ProposedTask], step: int) -> list[dict[str, Any]]:
        """One reader reset task per task (the evidence shuffled with distractors)."""
        ...

    def grounded(self, readers: TrajectoryGroup) -> str | None:
        """Why the readers' results refuse the task, or None."""
        ...


class ScoresProposals(Protocol):
    """What plays a proposal's scoring episodes in place of its trained solvers (a frozen
    snapshot of the policy)."""

    def collect_for(self, step: int) -> Collect:
        """How step `step`'s scoring episodes are played."""
        ...


class SelfPlay:
    def __init__(
        self, domain: SelfPlayDomain, pool: TaskPool, settings: SelfPlaySection, solvers: int,
        scorer: ScoresProposals | None = None,
    ) -> None:  # fmt: skip
        self.domain, self.pool, self.settings = domain, pool, settings
        self.solvers = solvers
        """Solver episodes per valid task (its group): the run's rollout.rollouts_per_task."""
        self.scorer = scorer
        """Plays the episodes whose solve rate pays a proposer; None: its solvers do."""
        self.rule = proposer_rule(settings.reward)
        self.proposed = 0
        """Proposals made so far (their ids are p0, p1, ...)."""
        self.solved = 0
        """Solver groups asked for so far."""
        self.read = 0
        """Reader groups asked for so far (grounding)."""
        self.last_metrics: dict[str, float] = {}
        self.baselines: dict[str, float] = {}
        """Per task kind, the proposers' running mean reward (`baseline: running`)."""

    async def build(self, ctx: BuildContext) -> list[TrajectoryGroup]:
        proposals = await self._propose(ctx)
        await self._validate(proposals, ctx)
        valid = [p for p in proposals if p.rejected is None and p.task is not None]
        solved = await ctx.collect(
            [self._solve(p.task, f"{p.trajectory.id}:solver") for p in valid if p.task]
        )
        scored = await self._score(valid, ctx.step) if self.scorer is not None else solved
        for p, scoring in zip(valid, scored, strict=True):
            self._reward(p, scoring)
        topped = self.pool.fill(max(self.settings.solver_groups - len(solved), 0))
        extra = await ctx.collect([
            self._solve(task, f"s{ctx.step}.{source}{k}:solver")
            for k, (source, task) in enumerate(topped)
        ]) if topped else []  # fmt: skip
        known = {self.domain.identity(t) for t in self.pool.tasks}
        new = [p.task for p in valid if p.task and self.domain.identity(p.task) not in known]
        self.pool.add(new)
        sources = Counter(source for source, _ in topped)
        self.last_metrics = self._metrics(proposals, solved) | {
            "solver_groups/proposed": float(len(solved)),
            "solver_groups/pool": float(sources["pool"]),
            "solver_groups/reference": float(sources["reference"]),
            "pool_repeats": float(len(valid) - len(new)),
        }
        reasons = Counter(p.rejected[:160] for p in proposals if p.rejected is not None)
        for reason, count in reasons.most_common(3):  # why proposals fail, for whoever watches
            log.info("self-play step %d: %d proposal(s) rejected: %s", ctx.step, count, reason)
        roles = {"proposer": self._proposer_groups(ctx.step, proposals),
                 "solver": [*solved, *extra]}  # fmt: skip
        for role in self.settings.frozen:
            for group in roles[role]:
                group.untrained = f"the {role} is frozen (selfplay.frozen)"
        self.last_metrics["solver_groups/out_of_band"] = float(self._band(roles["solver"]))
        self.last_metrics |= {f"proposer_baseline/{k}": b for k, b in self.baselines.items()}
        self.last_metrics |= _batch_metrics(roles["proposer"], roles["solver"])
        if self.scorer is not None:
            rates = [rate for g in scored if (rate := solve_rate(g)) is not None]
            self.last_metrics |= {"snapshot_solve_rate": sum(rates) / len(rates)} if rates else {}
        groups = [g for role_groups in roles.values() for g in role_groups]
        groups += scored if self.scorer is not None else []
        if groups and all(g.untrained for g in groups):
            log.warning("self-play step %d: every group is kept out of the update (%s), so "
                        "the step trains on nothing", ctx.step, groups[0].untrained)  # fmt: skip
        return groups

    def _band(self, solvers: list[TrajectoryGroup]) -> int:
        """Mark the solver groups whose solve rate lies outside `solver_band` untrained;
        how many were."""
        if self.settings.solver_band is None:
            return 0
        lo, hi = self.settings.solver_band
        outside = 0
        for group in solvers:
            rate = solve_rate(group)
            if group.untrained is None and rate is not None and not lo <= rate <= hi:
                group.untrained = f"its solve rate {rate:.2f} is outside [{lo}, {hi}]"
                outside += 1
        return outside

    async def _propose(self, ctx: BuildContext) -> list[Proposal]:
        """The step's proposer episodes, each shown pool tasks drawn for it (with their
        solutions: the env shows what of them it reads), and their tasks read, with where
        they came from."""
        first, self.proposed = self.proposed, self.proposed + self.settings.proposals
        shown = [self.pool.show(self.settings.shown, ctx.step, i - first)
                 for i in range(first, self.proposed)]  # fmt: skip
        asked = [
            GroupRequest(self.domain.proposer, TaskDraw("selfplay", i, {
                "examples": [t.model_dump(mode="json", exclude={"provenance"}) for t in tasks],
                "proposal": f"p{i}"}, i), 1, "proposer")
            for i, tasks in zip(range(first, self.proposed), shown, strict=True)
        ]  # fmt: skip
        played = await ctx.collect(asked)
        proposals = [read_task(g.trajectories[0]) for g in played]
        for p, tasks in zip(proposals, shown, strict=True):
            if p.task is not None:
                p.task = p.task.model_copy(update={"provenance": Provenance(
                    proposer=p.trajectory.id, policy_version=ctx.policy_version,
                    shown=tuple(t.instruction[:64] for t in tasks),
                )})  # fmt: skip
        return proposals

    async def _validate(self, proposals: list[Proposal], ctx: BuildContext) -> None:
        """The domain's stages, its grounding (if it grounds tasks), then repeats within the
        step; a rejected proposal earns the penalty, a repeat 0."""
        validate(proposals, [*self.domain.stages(), ("solver task", self._solver_task_stage)])
        if isinstance(self.domain, GroundsTasks):
            await self._ground([p for p in proposals if p.rejected is None], ctx)
        first: dict[str, str] = {}
        for p in proposals:
            if p.rejected is None and p.task is not None:
                earlier = first.setdefault(self.domain.identity(p.task), p.trajectory.id)
                if earlier != p.trajectory.id:
                    p.rejected, p.stage = f"{REPEAT}: the task {earlier} proposed this step", REPEAT
        penalty = {REPEAT: 0.0, FORMAT: self.settings.format_penalty}
        for p in proposals:
            if p.rejected is not None:
                p.trajectory.record(
                    PROPOSER, penalty.get(p.stage or "", self.settings.invalid_penalty)
                )

    async def _ground(self, proposals: list[Proposal], ctx: BuildContext) -> None:
        domain = self.domain
        assert isinstance(domain, GroundsTasks)
        tasks = [p.task for p in proposals if p.task is not None]
        if not tasks:
            return
        requests = []
        for reset in domain.grounding_tasks(tasks, ctx.step):
            index, self.read = self.read, self.read + 1
            draw = TaskDraw("grounding", index, reset, index)
            requests.append(GroupRequest(self.domain.solver, draw, self.settings.readers, "reader"))
        for proposal, readers in zip(proposals, await ctx.collect(requests), strict=True):
            reason = domain.grounded(readers)
            if reason is not None:
                proposal.rejected, proposal.stage = f"grounding: {reason}", "grounding"

    async def _score(self, valid: Sequence[Proposal], step: int) -> list[TrajectoryGroup]:
        """The scorer's episodes of each valid task, as many as its solvers (role
        "snapshot"), kept out of the update (they are counted among the step's episodes:
        they cost env steps)."""
        assert self.scorer is not None
        requests = [
            replace(self._solve(p.task, f"{p.trajectory.id}:snapshot"), role="snapshot")
            for p in valid
            if p.task
        ]
        scored = await self.scorer.collect_for(step)(requests)
        for group in scored:
            group.untrained = "it scores its proposal (selfplay.scorer: snapshot)"
        return scored

    def _solver_task_stage(self, task: ProposedTask, proposal: Proposal) -> str | None:
        """A task the domain cannot turn into a solver's reset task is refused here (a
        stage that raises rejects with what it raised), not when its solvers start."""
        self.domain.solver_task(task)
        return None

    def _solve(self, task: ProposedTask, name: str) -> GroupRequest:
        """A solver group's request, its group called `name`; its draw index is the run's
        count of them."""
        reset = self.domain.solver_task(task)
        seed = reset.get("seed")
        index, self.solved = self.solved, self.solved + 1
        draw = TaskDraw("selfplay", index, reset, seed if isinstance(seed, int) else index)
        return GroupRequest(self.domain.solver, draw, self.solvers, "solver", name)

    def _reward(self, proposal: Proposal, solvers: TrajectoryGroup) -> None:
        rate, proposer = solve_rate(solvers), proposal.trajectory
        if rate is None:
            proposer.infra_error = f"its solvers all failed to run ({solvers.group_id})"
        else:
            proposer.record(PROPOSER, self.rule(rate))

    def _proposer_groups(self, step: int, proposals: Sequence[Proposal]) -> list[TrajectoryGroup]:
        """One group per task kind (the partition baseline); unreadable proposals with the
        first kind, as they earn the penalty whatever they meant to be."""
        kinds: dict[str, list[Proposal]] = {}
        default = next((p.task.kind for p in proposals if p.task is not None), "unknown")
        for p in proposals:
            kinds.setdefault(p.task.kind if p.task is not None else default, []).append(p)
        for kind, members in kinds.items():
            if len(members) == 1 and self.settings.baseline == "group":
                log.warning("self-play step %d: the %s proposers' partition holds one proposal, "
                            "so it has no baseline (advantage 0)", step, kind)  # fmt: skip
        return [
            TrajectoryGroup(f"s{step}:{kind}:proposer", None, [p.trajectory for p in members],
                            self.domain.proposer.name, baseline=self._baseline(kind, members))
            for kind, members in kinds.items()
        ]  # fmt: skip

    def _baseline(self, kind: str, members: Sequence[Proposal]) -> float | None:
        """With `baseline: running`, the kind's running mean reward moved by this step's
        proposals (updated before use, as SPIRAL does); None: the group's own mean."""
        if self.settings.baseline != "running":
            return None
        rewards = [m.trajectory.total_reward for m in members if not m.trajectory.masked]
        if rewards:
            mean, past = sum(rewards) / len(rewards), self.baselines.get(kind)
            decay = self.settings.baseline_decay
            self.baselines[kind] = mean if past is None else decay * past + (1 - decay) * mean
        return self.baselines.get(kind)

    def _metrics(
        self, proposals: Sequence[Proposal], solved: Sequence[TrajectoryGroup]
    ) -> dict[str, float]:
        n = max(len(proposals), 1)
        stages = Counter(p.stage for p in proposals if p.rejected is not None)
        rates = [rate for g in solved if (rate := solve_rate(g)) is not None]
        unique = {p.task.instruction for p in proposals if p.task is not None}
        return {
            "valid": sum(p.rejected is None for p in proposals) / n,
            **{f"rejected/{stage}": count / n for stage, count in stages.items()},
            **({"solve_rate": sum(rates) / len(rates)} if rates else {}),
            "unique": len(unique) / n,
            "instruction_chars": sum(len(p.task.instruction) for p in proposals if p.task) / n,
            "pool": float(len(self.pool)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"proposed": self.proposed, "solved": self.solved, "read": self.read,
                "baselines": dict(self.baselines), "pool": self.pool.state_dict()}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.proposed = int(state.get("proposed", 0))
        self.solved = int(state.get("solved", 0))
        self.read = int(state.get("read", 0))
        self.baselines = {str(k): float(v) for k, v in state.get("baselines", {}).items()}
        self.pool.load_state_dict(state.get("pool", {}))
        self._drop_unplayable()

    def _drop_unplayable(self) -> None:
        """Keep of a restored pool only the tasks the domain can hand a solver: a checkpoint's
        pool is data from outside this process (another version's rules, a damaged or
        hand-edited file), and one task the domain cannot read would stop every step that
        tops its batch up with it."""
        kept, refused = [], []
        for task in self.pool.proposed:
            try:
                self.domain.solver_task(task)
                self.domain.identity(task)
            except Exception as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
                continue
            kept.append(task)
        if refused:
            log.warning("self-play: %d task(s) of the restored pool dropped, as the %s domain "
                        "cannot hand them to a solver (first: %s)", len(refused),
                        self.domain.name, refused[0][:200])  # fmt: skip
            self.pool.proposed = kept


def _batch_metrics(
    proposers: Sequence[TrajectoryGroup], solvers: Sequence[TrajectoryGroup]
) -> dict[str, float]:
    """What the step's batch holds: its solver groups by solve rate (none, some, all solved;
    `some`, 0 < p < 1, are the groups a group-relative advantage learns from), and the
    proposer's share of the generated tokens the update trains on."""
    rates = [rate for g in solvers if (rate := solve_rate(g)) is not None]
    n = max(len(rates), 1)

    def tokens(groups: Sequence[TrajectoryGroup]) -> int:
        return sum(t.generated_tokens for g in groups if g.untrained is None
                   for t in g.trajectories if not t.masked)  # fmt: skip

    proposed = tokens(proposers)
    total = proposed + tokens(solvers)
    return {
        "solver_rates/none": sum(r == 0 for r in rates) / n,
        "solver_rates/some": sum(0 < r < 1 for r in rates) / n,
        "solver_rates/all": sum(r == 1 for r in rates) / n,
        "proposer_token_share": proposed / total if total else 0.0,
    }
