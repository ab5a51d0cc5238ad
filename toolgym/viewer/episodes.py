"""Episodes as the viewer's pages show them: a row per episode for a step's table (filtered
and paged), and one episode whole, turn by turn: its tokens with the advantage each was
given, its tool calls and results, its rewards, the anchor state it was compared in and
the turns of its group that shared it, its policy version and staleness, and the mask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolgym.agents.trajectory import Step, Trajectory
from toolgym.viewer.runs import PAGE_MAX, NotFound, Run


@dataclass(frozen=True)
class Filters:
    """A step table's filters (each None or empty: any)."""

    env: str | None = None
    role: str | None = None
    success: bool | None = None
    masked: bool | None = None
    min_return: float | None = None
    max_return: float | None = None
    text: str = ""

    def keep(self, t: Trajectory) -> bool:
        ret = t.total_reward
        return (
            (self.env is None or t.env_name == self.env)
            and (self.role is None or t.role == self.role)
            and (self.success is None or succeeded(t) == self.success)
            and (self.masked is None or t.masked == self.masked)
            and (self.min_return is None or ret >= self.min_return)
            and (self.max_return is None or ret <= self.max_return)
            and (not self.text or self.text.casefold() in searchable(t))
        )


def succeeded(t: Trajectory) -> bool:
    return t.success


def searchable(t: Trajectory) -> str:
    texts = [str(m.get("content", "")) for m in t.messages]
    for s in t.steps:
        texts.append(s.action)
        texts += [str(m.get("content", "")) for m in s.observation]
    return "\n".join(texts).casefold()


def row(index: int, t: Trajectory) -> dict[str, Any]:
    return {
        "index": index, "id": t.id, "group_id": t.group_id, "env": t.env_name, "role": t.role,
        "item": t.item, "return": t.total_reward, "success": succeeded(t), "turns": len(t.steps),
        "masked": t.masked, "infra_error": t.infra_error, "end": t.end.value if t.end else None,
        "trained": any(s.advantage is not None for s in t.steps), "untrained": t.untrained,
    }  # fmt: skip


def page(
    trajectories: list[Trajectory], filters: Filters, offset: int, limit: int
) -> dict[str, Any]:
    chosen = [(k, t) for k, t in enumerate(trajectories) if filters.keep(t)]
    limit = max(1, min(limit, PAGE_MAX))
    offset = max(0, offset)
    return {
        "total": len(trajectories),
        "matching": len(chosen),
        "offset": offset,
        "rows": [row(k, t) for k, t in chosen[offset : offset + limit]],
        "envs": sorted({t.env_name for t in trajectories}),
        "roles": sorted({t.role for t in trajectories}),
    }


def episode(run: Run, step: int, index: int) -> dict[str, Any]:
    kept = run.step_file(step).trajectories
    if not 0 <= index < len(kept):
        raise NotFound(
            f"no episode {index} in step {step} of run {run.name}, which kept {len(kept)}"
            " (numbered from 0)"
        )
    t = kept[index]
    mates = [(k, other) for k, other in enumerate(kept) if other.group_id == t.group_id]
    turns = [turn(run, step, t, k, s, mates) for k, s in enumerate(t.steps)]
    return {
        "step": step, "index": index, **row(index, t), "seed": t.seed, "task": t.task,
        "messages": t.messages, "images": t.images, "tokens": len(t.token_ids),
        "generated": t.generated_tokens, "tokenizer_problem": run.tokenizer_problem,
        "scores": t.scores, "answer": t.answer, "verdict": t.verdict, "expected": t.expected,
        "turns": turns,
    }  # fmt: skip


def turn(
    run: Run, step: int, t: Trajectory, k: int, s: Step, mates: list[tuple[int, Trajectory]]
) -> dict[str, Any]:
    ids = t.token_ids[s.response_start : s.response_end]
    pieces = run.token_pieces(ids)
    texts: list[str | None] = list(pieces) if pieces is not None else [None] * len(ids)
    logprobs: list[float | None] = [*s.logprobs, *[None] * len(ids)][: len(ids)]
    shared = [
        {"index": j, "id": other.id, "turn": m + 1, "advantage": o.advantage, "action": o.action}
        for j, other in mates
        for m, o in enumerate(other.steps)
        if o.advantage is not None and o.anchor == s.anchor and (other is not t or m != k)
    ] if s.advantage is not None else []  # fmt: skip
    return {
        "turn": k + 1, "action": s.action, "advantage": s.advantage,
        "tokens": [{"id": i, "text": x, "logprob": lp} for i, x, lp in zip(ids, texts, logprobs, strict=True)],
        "observation": s.observation, "tool_calls": s.tool_calls, "reward": s.reward,
        "rewards": s.rewards, "scores": s.scores, "valid": s.valid_action, "error": s.error,
        "finish_reason": s.finish_reason, "state": str(s.state_key),
        "next_state": str(s.next_state_key),
        "anchor": None if s.anchor is None else str(s.anchor),
        "anchor_mates": shared, "policy_version": s.policy_version,
        "staleness": step - 1 - s.policy_version, "result": s.result,
        "generate_s": s.generate_s, "env_s": s.env_s,
    }  # fmt: skip


def across_steps(run: Run, item: str) -> list[dict[str, Any]]:
    """The episodes of one item (what the policy saw at reset) in every kept step."""
    out = []
    for step in run.steps():
        for k, t in enumerate(run.step_file(step).trajectories):
            if t.item == item:
                out.append({"step": step, **row(k, t)})
    return out
