"""One gateway session: an episode's calls joined into token sequences exactly as sampled.

A call continues the session's current segment when its messages are the segment's
messages so far, then the reply the gateway gave, then new ones (tool results, a user's
turn), with the same tools. Its prompt is then the segment's ids, the reply's sampled ids
and the renderer's delta for the new messages (render.py): the model's text is never
decoded and encoded again. Any other call (the harness dropped, edited or summarised
earlier turns, or changed its tools) starts a new segment from its own rendering. The
segments of an episode share its reward; each is trained as a sequence of its own
(Trajectory.segment_starts), and only sampled tokens are trained on.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

from toolgym.agents.engines.base import Completion, SamplingParams
from toolgym.agents.gateway.conversation import MessageKey, message_key, state_key, tools_key
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import turn_seed
from toolgym.agents.trajectory import EpisodeEnd, Step, Trajectory

Message = dict[str, Any]


@dataclass(frozen=True)
class SessionSettings:
    """How a session's calls are sampled and bounded."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Temperature, top-p and the base of each call's seed; `max_tokens` caps every call's
    reply (a harness may ask for fewer). The harness's own temperature is not used: what is
    trained on must be sampled as the run samples."""
    adapter: str | None = None
    """The LoRA adapter the engine generates with (None: the base weights)."""
    max_calls: int = 16
    """Model calls in the episode; the next one is refused and ends it (max_turns)."""
    max_completion_tokens: int = 4096
    """Tokens the model may write over the episode; then calls are refused (context)."""
    max_context_tokens: int = 4096
    """Tokens of one call's prompt and reply together."""
    hold_calls: bool = True
    """Each call holds the policy gate, so a weight sync lands between calls and each is
    stamped with the version that sampled it. False: whoever plays the episode holds the
    gate for all of it."""


class BudgetSpent(Exception):
    """The session's budget refuses this call; the episode ends `end`."""

    def __init__(self, end: EpisodeEnd, message: str) -> None:
        super().__init__(message)
        self.end = end


@dataclass
class _Segment:
    start: int
    """Where its ids begin in the episode's token_ids."""
    history: list[MessageKey]
    """Its messages so far, the last reply included."""
    tools: str
    completion: list[int]
    """The last reply's sampled ids (the delta after it depends on how it ended)."""


@dataclass(frozen=True)
class Prompt:
    """What one call sends the engine, and what it adds to the episode."""

    ids: list[int]
    """The whole prompt of this call."""
    added: list[int]
    """Ids the episode's token_ids gain before the reply (a delta, or a new segment's prompt)."""
    new_segment: bool
    history: list[MessageKey]
    tools: str
    observation: list[Message]
    """What the harness added since the last reply (a continuing call), or all the call's
    messages (a new segment: the model reads them anew)."""
    tool_schemas: list[dict[str, Any]]

    @property
    def state(self) -> str:
        return state_key(self.history, self.tools)


class Session:
    def __init__(
        self, id: str, key: str, settings: SessionSettings, renderer: ChatRenderer,
        trajectory: Trajectory,
    ) -> None:  # fmt: skip
        self.id, self.key, self.settings, self.renderer = id, key, settings, renderer
        self.trajectory = trajectory
        self.segments: list[_Segment] = []
        self.lock = asyncio.Lock()
        """One call at a time: a call's prompt depends on the reply before it."""
        self.last_call = time.monotonic()
        """When the last reply was sent (or the session opened)."""
        self.in_flight = 0
        """Calls being answered now."""
        self.completion_tokens = 0
        self.harness_s = 0.0
        """The harness's time between the last reply and this call (its tools' time)."""
        self.ended: BudgetSpent | None = None
        """The budget that refused a call: the episode ended there, by the policy's doing."""
        self.call_names: dict[str, str] = {}
        """The tool each reply's call id names, so the harness's tool results (which carry
        the id, not the name) are shown under their tool."""
        self.closed = False
        self.failed: str | None = None
        """Why a call failed outside the policy (the engine): the episode is masked."""

    def idle_s(self) -> float:
        """How long the session has had no call: 0 while one is being answered."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_call

    @property
    def calls(self) -> int:
        return len(self.trajectory.steps)

    def check_budget(self) -> None:
        s = self.settings
        if self.ended is not None:
            raise self.ended
        if self.calls >= s.max_calls:
            self._end(EpisodeEnd.MAX_TURNS, f"this episode's {s.max_calls} model calls are spent")
        if self.completion_tokens >= s.max_completion_tokens:
            self._end(
                EpisodeEnd.CONTEXT,
                f"this episode's budget of {s.max_completion_tokens} generated tokens is spent",
            )

    def prompt(self, messages: list[Message], tools: list[dict[str, Any]]) -> Prompt:
        """The call's prompt: the current segment continued, or a new one."""
        self.harness_s = time.monotonic() - self.last_call if self.calls else 0.0
        keys, tools_text = [message_key(m) for m in messages], tools_key(tools)
        segment = self.segments[-1] if self.segments else None
        if segment is not None and self._continues(segment, keys, tools_text):
            new = messages[len(segment.history) :]
            delta = self.renderer.delta_ids(new, segment.completion, tools)
            ids = self.trajectory.token_ids[segment.start :] + delta
            return Prompt(ids, delta, False, keys, tools_text, new, tools)
        ids = self.renderer.prompt_ids(messages, tools or None)
        return Prompt(ids, ids, True, keys, tools_text, messages, tools)

    def sampling(self, prompt: Prompt, forced: list[int], asked: SamplingParams) -> SamplingParams:
        """The call's sampling: the session's, bounded by the context left and by what the
        harness asked for (`max_tokens`, stop strings)."""
        room = self.settings.max_context_tokens - len(prompt.ids) - len(forced)
        if room <= 0:
            self._end(
                EpisodeEnd.CONTEXT,
                f"the conversation has {len(prompt.ids) + len(forced)} tokens; this episode's "
                f"context holds {self.settings.max_context_tokens}",
            )
        base = self.settings.sampling
        left = self.settings.max_completion_tokens - self.completion_tokens
        return replace(
            base, max_tokens=min(base.max_tokens, asked.max_tokens, room, left),
            stop=asked.stop, stop_token_ids=asked.stop_token_ids,
            seed=turn_seed(base.seed, self.trajectory.id, self.calls),
            top_logprobs=asked.top_logprobs,
        )  # fmt: skip

    def record(
        self, prompt: Prompt, forced: list[int], completion: Completion, text: str,
        reply: MessageKey, calls: list[dict[str, Any]], valid: bool, version: int,
        generate_s: float,
    ) -> None:  # fmt: skip
        """Add the call and its reply to the episode."""
        traj = self.trajectory
        if prompt.new_segment:
            if traj.token_ids:
                traj.segment_starts.append(len(traj.token_ids))
            else:  # the episode's opening: what the model first read
                traj.prompt_length, traj.tools = len(prompt.ids), prompt.tool_schemas
                traj.messages = prompt.observation
            self.segments.append(_Segment(len(traj.token_ids), [], prompt.tools, []))
        if traj.steps:  # what the harness answered the last reply with
            traj.steps[-1].observation = self._named(prompt.observation)
            traj.steps[-1].next_state_key = prompt.state
        traj.token_ids += prompt.added + forced
        begin = len(traj.token_ids)
        traj.token_ids += completion.token_ids
        traj.steps.append(
            Step(
                begin, len(traj.token_ids), list(completion.logprobs), text, [], 0.0,
                prompt.state, "end", valid, calls, None, completion.finish_reason, generate_s,
                self.harness_s, version,
            )
        )  # fmt: skip
        segment = self.segments[-1]
        segment.history, segment.completion = [*prompt.history, reply], completion.token_ids
        self.completion_tokens += len(completion.token_ids)
        self.last_call = time.monotonic()

    def _named(self, messages: list[Message]) -> list[Message]:
        """`messages` with each tool result that names no tool given its call's."""
        named = []
        for m in messages:
            called = self.call_names.get(str(m.get("tool_call_id")))
            if m.get("role") == "tool" and not m.get("name") and called is not None:
                m = {**m, "name": called}
            named.append(m)
        return named

    def _continues(self, segment: _Segment, keys: list[MessageKey], tools: str) -> bool:
        known = len(segment.history)
        return segment.tools == tools and len(keys) > known and keys[:known] == segment.history

    def _end(self, end: EpisodeEnd, message: str) -> None:
        self.ended = BudgetSpent(end, message)
        raise self.ended
