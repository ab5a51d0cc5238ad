"""Trajectories: exactly what the policy did, token by token, and what the env answered.

One flat token sequence per episode (prompt, then completion and delta ids in turn, see
render.py), with each step's response span in it. Everything the trainer needs is here:
the loss mask (the response spans), behaviour log-probabilities, per-step rewards, and the
state each action was taken in (GiGPO's anchor). Trajectories round-trip through JSONL.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from toolgym.envs.tasks.held_out import opening_item
from toolgym.errors import ConfigError, ToolgymError, one_line

Message = dict[str, Any]
R = TypeVar("R")

SCHEMA_VERSION = 2
"""The rollout schema's version, written with every trajectory (`schema_version`) and
documented in docs/rollouts.md. A reader takes its own version and earlier ones (a line
without one is version 0, the same fields) and refuses a later one by name. It moves when a
field changes meaning or goes; a field added with a default keeps it. Version 2: `Step.reward`
is the env's alone (a harness's result, a proposer's reward moved to `Trajectory.scores`)."""


class ResultError(ToolgymError, ValueError):
    """An episode's result does not have the shape its reader expects."""


class EpisodeEnd(enum.StrEnum):
    TERMINATED = "terminated"  # the env reached an end state
    TRUNCATED = "truncated"  # the env's own turn limit
    MAX_TURNS = "max_turns"  # the rollout's turn limit
    CONTEXT = "context"  # the context budget ran out
    TIMEOUT = "timeout"  # the episode ran past its time limit (masked)
    INFRA_ERROR = "infra_error"  # a server, sandbox or tool reported a failure (masked)
    ENV_FAILED = "env_failed"  # the env raised, hung or answered in the wrong shape (masked)


@dataclass
class Step:
    response_start: int
    """Offset of this step's first generated token in Trajectory.token_ids."""
    response_end: int
    logprobs: list[float]
    """Behaviour log-probabilities of the generated tokens."""
    action: str
    observation: list[Message]
    reward: float
    """The env's reward for this step, as `astep` returned it: no one else writes it (scores
    of the whole episode are `Trajectory.scores`)."""
    state_key: Hashable
    """The state the action was taken in (GiGPO groups steps by it)."""
    next_state_key: Hashable
    valid_action: bool = True
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    finish_reason: str = "stop"
    generate_s: float = 0.0
    env_s: float = 0.0
    policy_version: int = 0
    rewards: dict[str, float] = field(default_factory=dict)
    """Named reward components, written by the reward stage alone (one per configured source:
    the env's, a recorded score, a judge's), weighted into what the advantages read."""
    result: Any = None
    """What the env handed back beside the observation (its info's "result": e.g. a task
    a proposer wrote), plain JSON data; read it typed with `Trajectory.results_as`."""
    advantage: float | None = None
    """The advantage the update gave this turn's tokens (None: not trained on: masked, an
    untrained group's, or an evaluation's)."""
    anchor: Hashable = None
    """The anchor state GiGPO compared this turn in: its state_key, or under
    anchor_similarity the alike earlier state it joined (None where not trained on)."""
    scores: dict[str, float] = field(default_factory=dict)
    """Named scores of this turn alone, recorded while the episode was played
    (`Trajectory.record(..., step=k)`: an agent's reward for one of its model calls); the
    reward source of the same name gives each to its step."""


@dataclass
class Trajectory:
    id: str
    group_id: str = ""
    env_id: str = ""
    seed: int | None = None
    messages: list[Message] = field(default_factory=list)
    """The opening messages (system, user)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    prompt_length: int = 0
    steps: list[Step] = field(default_factory=list)
    end: EpisodeEnd | None = None
    infra_error: str | None = None
    elapsed_s: float = 0.0
    env_name: str = ""
    """The name the run gives this env (a mixture's entry); metrics are kept per name."""
    role: str = "policy"
    """Which part the policy played (e.g. solver or proposer in self-play)."""
    task: dict[str, Any] | None = None
    """The task given to reset, if any."""
    images: list[str] = field(default_factory=list)
    """The images whose placeholder tokens are in token_ids, in order, as data URLs (for a
    vision-language model; a text-only model's trajectories have none)."""
    untrained: str | None = None
    """Why the update left this episode out though it was not masked: its group's reason
    (TrajectoryGroup.untrained: a frozen role, a solve rate outside the band)."""
    solved: bool | None = None
    """The env's verdict of success (its info's "solved" at the end); None where the env
    gives none, and `success` falls back to a positive return."""
    scores: dict[str, float] = field(default_factory=dict)
    """Named scores of the whole episode, recorded while it was played by what knows them
    (`record`: the gateway's `result` of a harness's answer, self-play's `proposer` reward).
    They are no step's reward: the reward source of the same name gives each to the last
    step's `rewards`."""
    answer: str | None = None
    """An agent harness's episode: what the agent answered (its result as text, cut to
    2,000 characters), which the checker scored."""
    verdict: str | None = None
    """What the checker said of that answer (the env's answer tool's reply)."""
    expected: str | None = None
    """What the task expected (envs/tasks/expected_answer.py), stored once the episode was over: it
    is never shown to the policy or its agent."""
    segment_starts: list[int] = field(default_factory=list)
    """Offsets in token_ids where another context starts: an episode played through the
    gateway whose harness rewrote its history holds several token sequences one after
    another, each trained on as a sequence of its own (empty: one sequence)."""

    @property
    def total_reward(self) -> float:
        """The env's rewards and the recorded scores, summed: the episode's return."""
        turns = sum(s.reward + sum(s.scores.values()) for s in self.steps)
        return float(turns + sum(self.scores.values()))

    def record(self, name: str, score: float, step: int | None = None) -> None:
        """Record the score `name` of the episode, or of its turn `step` (one hook for every
        score made beside the env's: the reward stage reads it through its registered source,
        never from `Step.reward`); a second record of the same replaces the first."""
        if not math.isfinite(score):
            raise ValueError(f"score {name!r} of {self.id} is {score}: scores must be finite")
        if step is None:
            self.scores[name] = float(score)
        else:
            self.steps[step].scores[name] = float(score)

    @property
    def success(self) -> bool:
        """Solved, as the env judged it (never a masked episode): what every success rate
        counts. Partial credit (a substring match, token F1) is a reward, not a success."""
        if self.masked:
            return False
        return self.solved if self.solved is not None else self.total_reward > 0

    @property
    def item(self) -> str:
        """What the policy saw at reset (the env and its opening messages), hashed: episodes
        of one item share it whatever seed or task drew them, so distinct items, and items
        shared between splits, are counted by it."""
        return opening_item([self.env_id, self.messages])

    @property
    def masked(self) -> bool:
        """Infrastructure failed: leave this trajectory out of every training statistic."""
        return self.infra_error is not None

    @property
    def terminated(self) -> bool:
        return self.end is EpisodeEnd.TERMINATED

    @property
    def loss_mask(self) -> list[int]:
        """1 on the model's own tokens, 0 on prompt and environment tokens."""
        mask = [0] * len(self.token_ids)
        for s in self.steps:
            mask[s.response_start : s.response_end] = [1] * (s.response_end - s.response_start)
        return mask

    def results_as(self, kind: type[R]) -> list[R]:
        """The steps' results, each validated as `kind` (a pydantic model or any type
        pydantic can check), in step order; steps without one are skipped. A result that
        does not fit raises ResultError naming the step (a policy's output is hostile)."""
        adapter = TypeAdapter(kind)
        out = []
        for k, step in enumerate(self.steps):
            if step.result is None:
                continue
            try:
                out.append(adapter.validate_python(step.result))
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(part) for part in first["loc"])
                problem = one_line(f"{where}: {first['msg']}" if where else first["msg"])
                raise ResultError(
                    f"{self.id} step {k}: its result is not a {getattr(kind, '__name__', kind)}: "
                    f"{problem}"
                ) from None
        return out

    def segments(self) -> list[tuple[int, int]]:
        """The (start, end) offsets of each token sequence in token_ids."""
        bounds = [0, *self.segment_starts, len(self.token_ids)]
        return list(itertools.pairwise(bounds))

    @property
    def generated_tokens(self) -> int:
        return sum(s.response_end - s.response_start for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        data = {"schema_version": SCHEMA_VERSION, **asdict(self)}
        data["end"] = self.end.value if self.end else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        version = data.get("schema_version", 0)
        if not isinstance(version, int) or not 0 <= version <= SCHEMA_VERSION:
            raise ValueError(
                f"rollout schema version {version!r}: this toolgym reads versions up to "
                f"{SCHEMA_VERSION} (a later toolgym wrote it?)"
            )
        known = {f.name for f in fields(cls)}
        traj = cls(**{k: v for k, v in data.items() if k in known and k != "steps"})
        traj.end = EpisodeEnd(data["end"]) if data.get("end") else None
        for s in data.get("steps", []):
            step = Step(**s)
            step.state_key, step.next_state_key, step.anchor = (
                _hashable(step.state_key),
                _hashable(step.next_state_key),
                _hashable(step.anchor),
            )
            traj.steps.append(step)
        return traj


@dataclass
class TrajectoryGroup:
    """The N rollouts of one task and seed (what group-relative advantages compare)."""

    group_id: str
    seed: int | None
    trajectories: list[Trajectory]
    env_name: str = ""
    untrained: str | None = None
    """Why the step plays this group but does not learn from it (a frozen role, a solve rate
    outside the band): its episodes are kept with the step's rollouts and counted in its
    metrics, and get no advantage."""
    baseline: float | None = None
    """What each episode's return is compared with when the builder knows better than the
    group's own mean (self-play's running mean per role and task kind); None: the group's."""


def rollout_json_schema() -> dict[str, Any]:
    """The rollout schema, a line of a trajectories file, as JSON Schema."""
    schema = TypeAdapter(Trajectory).json_schema()
    schema["properties"] = {
        "schema_version": {"const": SCHEMA_VERSION, "type": "integer"},
        **schema["properties"],
    }
    schema["title"] = f"toolgym rollout, schema version {SCHEMA_VERSION}"
    return schema


def write_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a lone surrogate (a model's "\ud800" in a call) is written as that JSON escape, which
    # reads back as the same string, instead of failing the whole file
    with path.open("w", encoding="utf-8", errors="backslashreplace") as f:
        for t in trajectories:
            f.write(json.dumps(t.to_dict(), ensure_ascii=False, default=str) + "\n")
    return path


def read_jsonl(path: str | Path, skipped: list[str] | None = None) -> list[Trajectory]:
    """The trajectories of a JSONL file (`write_jsonl`'s); a line that is not one is a
    ConfigError naming the file and line (metrics.jsonl, say, given by mistake). Given a
    `skipped` list, such a line is left out instead and said there ("line 7: ..."): a file cut
    short or damaged still shows what it holds."""
    out = []
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if "\\ud" in line.lower():  # an escaped surrogate: a lone one is no text
                data = _whole_text(data)
            trajectory = Trajectory.from_dict(data)
            _check_shape(trajectory)
            out.append(trajectory)
        except (json.JSONDecodeError, TypeError, KeyError, ValueError, AttributeError,
                ValidationError, RecursionError) as exc:  # fmt: skip
            why = one_line(f"{type(exc).__name__}: {exc}", 120)
            if skipped is None:
                raise ConfigError(
                    f"{path}:{number}: not a trajectory as toolgym writes them ({why})"
                ) from None
            skipped.append(f"line {number}: {why}")
    return out


def _check_shape(trajectory: Trajectory) -> None:
    """TypeError unless the fields every reader computes with have their types: a stored
    line is shared data, and a reader must be total on it."""
    if not isinstance(trajectory.id, str) or not isinstance(trajectory.env_id, str):
        raise TypeError("its 'id' and 'env_id' must be strings")
    if not isinstance(trajectory.messages, list) or not isinstance(trajectory.token_ids, list):
        raise TypeError("its 'messages' and 'token_ids' must be lists")
    if any(not isinstance(v, str | None) for v in (trajectory.answer, trajectory.verdict)):
        raise TypeError("its 'answer' and 'verdict' must be text")
    scores = trajectory.scores
    if not isinstance(scores, dict) or any(
        isinstance(v, bool) or not isinstance(v, int | float) for v in scores.values()
    ):
        raise TypeError("its 'scores' must map names to numbers")
    for k, step in enumerate(trajectory.steps):
        numbers = (step.reward, step.generate_s, step.env_s)
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers):
            raise TypeError(f"step {k}: its reward and timings must be numbers")
        if not all(isinstance(v, int) for v in (step.response_start, step.response_end)):
            raise TypeError(f"step {k}: its token offsets must be integers")
        if step.advantage is not None and not isinstance(step.advantage, int | float):
            raise TypeError(f"step {k}: its advantage must be a number")
        if not isinstance(step.action, str) or not isinstance(step.observation, list):
            raise TypeError(f"step {k}: its action must be text and its observation a list")


def _whole_text(value: Any) -> Any:
    """`value` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_whole_text(v) for v in value]
    if isinstance(value, dict):
        return {_whole_text(k): _whole_text(v) for k, v in value.items()}
    return value


def _hashable(value: Any) -> Any:
    """JSON turns tuples into lists; turn them back so state keys stay hashable."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
