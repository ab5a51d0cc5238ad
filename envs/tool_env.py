"""ToolEnv: an Env whose actions are tool calls. Subclass it, declare tools as `@tool`
methods, and fill in three hooks:

    async def start(self, seed, options) -> list[Message]   # new episode; opening user turn
    def outcome(self) -> Outcome                             # reward / end after each call
    def state_key(self) -> Hashable                          # optional; default hashes the obs

Each step parses the model's text with the env's parser (Hermes `<tool_call>` by default),
runs the calls in order, answers with one `tool` message per call, and reports what was wrong
(malformed call, unknown tool, bad arguments) as text the model can read. Only a programming
error in the env itself raises.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolgym.envs.core import Env, Message, copy_messages, make_info
from toolgym.errors import ConfigError, ToolgymError
from toolgym.tools.parsers import ActionParser, make_parser
from toolgym.tools.parsers.base import MAX_ERRORS, parse_safely
from toolgym.tools.records import ToolCall, ToolErrorKind, ToolResult
from toolgym.tools.text import clean_messages, clean_text, clip, clip_list
from toolgym.tools.tool import Tool
from toolgym.tools.tool_source import ToolSource
from toolgym.tools.toolset import ToolSet

FEEDBACK_CHARS = 4000
"""The most characters of one turn's list of problems."""

_POLICY_MISTAKES = (ToolErrorKind.UNKNOWN_TOOL, ToolErrorKind.INVALID_ARGUMENTS)


class EpisodeOverError(ToolgymError, RuntimeError):
    """`step` was called before `reset` or after the episode ended."""


@dataclass(frozen=True)
class Outcome:
    """The env's verdict after a tool call: this step's reward and whether the task ended."""

    reward: float = 0.0
    terminated: bool = False
    solved: bool | None = None
    """Whether the ending verdict solved the task, in the verifier's own sense; None: the
    default rule, solved when the ending reward is the full SOLVED_REWARD. An env whose
    reward gives partial credit (a substring, token F1, points of a game) says it here."""


SOLVED_REWARD = 1.0
"""The ending reward that counts as solved when an env's Outcome does not say."""


def solved(outcome: Outcome) -> bool:
    """The episode's success, once it ended: blind or partial credit is never a success."""
    if not outcome.terminated:
        return False
    return outcome.solved if outcome.solved is not None else outcome.reward >= SOLVED_REWARD


class ToolEnv(Env):
    """An environment driven by tool calls. See the module docstring for the hooks.

    Args:
        parser: an ActionParser or a registered parser name ("hermes", "xml", "fenced").
        max_turns: the episode is truncated after this many model turns.
        max_calls_per_turn: calls beyond this in one turn are not run (the action is invalid);
            16 by default, None for no limit.
        invalid_action_reward: added to the step reward when the action was malformed.
        tool_timeout_s: overrides every tool's own timeout when given.
        tool_sources: tools found at run time (`MCPTools`: an MCP server's), added to the
            declared ones before the first episode.
        render_mode: "ansi" to let `render()` return the transcript as text.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012  (Gymnasium's declaration)
    instructions: str = ""
    """Task-independent guidance placed in the system message."""

    def __init__(
        self,
        *,
        parser: ActionParser | str = "hermes",
        max_turns: int = 20,
        max_calls_per_turn: int | None = 16,
        invalid_action_reward: float = 0.0,
        tool_timeout_s: float | None = None,
        tool_sources: Sequence[ToolSource] = (),
        render_mode: str | None = None,
    ) -> None:
        self.parser = make_parser(parser) if isinstance(parser, str) else parser
        self.max_turns = max_turns
        self.max_calls_per_turn = max_calls_per_turn
        self.invalid_action_reward = invalid_action_reward
        self.render_mode = render_mode
        self.tool_timeout_s = tool_timeout_s
        self.toolset = ToolSet(self._timed(self.collect_tools()))
        self._schemas = self.toolset.schemas()
        for source in tool_sources:
            if not isinstance(source, ToolSource):
                raise ConfigError(
                    f"{type(source).__name__} is not a tool source (an object with "
                    "`async def load(self, shared) -> list[Tool]`, such as MCPTools)"
                )
        self._unloaded_sources = list(tool_sources)
        self.turn: int | None = None
        self.done = False
        self.transcript: list[Message] = []
        self._last_obs: list[Message] = []
        self._result: Any = None

    # ----- hooks for subclasses -------------------------------------------------------------
    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[Message]:
        """Set up a new episode from `seed` / `options`; return the opening user message(s)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async def start(self, seed, options)`"
        )

    def outcome(self) -> Outcome:
        """Called after each tool call (and after accepted text): that call's own reward, not
        a running total, and whether the task has ended. Default: nothing happens."""
        return Outcome()

    def state_key(self) -> Hashable:
        """Key of the current state; by default a hash of the last observation's text."""
        text = json.dumps(
            [(m["role"], m["content"]) for m in self._last_obs], sort_keys=True, default=str
        )
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def injections(self) -> dict[str, Any]:
        """Values for tools' `Injected[...]` arguments, by argument name."""
        return {"env": self}

    async def on_text(self, text: str) -> str | None:
        """A turn without any tool call. Return feedback to accept it, None to call it invalid."""
        return None

    def hand_back(self, result: Any) -> None:
        """Give the step that runs this call a `result` (plain JSON data: a proposer env's
        typed task, a finished game's summary), read by whoever runs the episode."""
        self._result = result

    async def observe(self) -> list[Message]:
        """Messages that follow a turn's tool results (what a page looks like now, say);
        none by default."""
        return []

    async def verdict_at_turn_end(self) -> Outcome:
        """A verdict the task reached by itself during a turn in which no call ran (its clock
        ran out while the model wrote text, or a malformed call), so idling never scores
        better than acting; a call that ran was followed by `outcome` already. Outcome()
        (nothing) by default."""
        return Outcome()

    async def on_episode_end(self) -> None:
        """Release what only the episode needed (a sandbox session), once it is over: the env
        may then sit idle in a pool until its next reset, and must not hold a shared slot
        meanwhile. Nothing by default."""

    def collect_tools(self) -> list[Tool]:
        """The `@tool` methods declared on this class and its bases, bound to this env. A
        subclass hides a base's tool by setting its name to None (a proposer env keeps the
        solver's exploring tools but not its submit)."""
        names: dict[str, None] = {}
        for cls in reversed(type(self).__mro__):
            for name, value in vars(cls).items():
                if isinstance(value, Tool):
                    names[name] = None
        return [t for name in names if isinstance(t := getattr(self, name), Tool)]

    def _timed(self, tools: list[Tool]) -> list[Tool]:
        if self.tool_timeout_s is None:
            return tools
        return [replace(t, timeout_s=self.tool_timeout_s) for t in tools]

    async def _load_tool_sources(self) -> None:
        """Add the tools of sources not loaded yet; one that fails stays for the next reset."""
        while self._unloaded_sources:
            for found in self._timed(await self._unloaded_sources[0].load(self.shared)):
                self.toolset.add(found)
            self._unloaded_sources.pop(0)
            self._schemas = self.toolset.schemas()

    # ----- the contract ---------------------------------------------------------------------
    def system_prompt(self) -> str:
        """The instructions, then the tools and how to call them (when there are any)."""
        tools = "\n".join(f"- {t.name}: {_summary(t.description)}" for t in self.toolset)
        parts = [self.instructions.strip()]
        if tools:
            parts += [f"Tools:\n{tools}", self.parser.format_hint()]
        return "\n\n".join(p for p in parts if p)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of this env's tools (for chat templates' `tools=`)."""
        return copy.deepcopy(self._schemas)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        await self._load_tool_sources()
        self.turn, self.done, self._result = 0, False, None
        opening = await self.start(seed, options)
        obs = clean_messages([{"role": "system", "content": self.system_prompt()}, *opening])
        self.transcript = copy_messages(obs)
        self._last_obs = obs
        return copy_messages(obs), make_info(self.state_key(), tools=self.tool_schemas())

    async def astep(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"an action is the model's text (str), got {type(action).__name__}")
        self._begin_turn(action)
        parsed = parse_safely(self.parser, action)
        problems = list(parsed.errors)
        calls = parsed.calls
        for index, call in enumerate(calls):
            call.id = f"call_{self.turn}_{index}"
        if self.max_calls_per_turn is not None and len(calls) > self.max_calls_per_turn:
            problems.append(
                f"at most {self.max_calls_per_turn} tool call(s) per turn; "
                f"the {len(calls) - self.max_calls_per_turn} after that were not run."
            )
            calls = calls[: self.max_calls_per_turn]
        obs: list[Message] = []
        results, outcome, reward = await self._run_calls(calls)
        obs += [r.to_message() for r in results]
        if any(r.images for r in results):
            obs.append(_images_message(results))
        if not calls and not parsed.errors:
            feedback = await self.on_text(parsed.text)
            if feedback is None:
                problems.append(
                    f"no tool call found. {self.parser.format_hint()} Tools: {', '.join(self.toolset.names)}."
                )
            else:
                obs.append({"role": "user", "content": feedback})
                outcome = self.outcome()
                reward += outcome.reward
        if not outcome.terminated and all(r.error is not None for r in results):
            reached = await self.verdict_at_turn_end()
            if reached.terminated:
                outcome, reward = reached, reward + reached.reward
        obs += await self.observe()
        if problems:
            listed = "\n".join(f"- {p}" for p in clip_list(problems, MAX_ERRORS))
            obs.append(
                {
                    "role": "user",
                    "content": "Your turn could not be fully used:\n"
                    + clip(listed, FEEDBACK_CHARS),
                }
            )
        obs = clean_messages(
            obs
        )  # tools and pages may return anything; the model reads valid Unicode
        valid = not problems and all(r.error not in _POLICY_MISTAKES for r in results)
        if not valid:
            reward += self.invalid_action_reward
        terminated, truncated = await self._close_turn(outcome, obs)
        result, self._result = self._result, None
        extra: dict[str, Any] = {} if result is None else {"result": result}
        extra["solved"] = solved(outcome)  # on every step: an episode the rollout cuts is not
        info = make_info(
            self.state_key(),
            valid_action=valid,
            tool_calls=[_call_record(r) for r in results],
            error=_error_text(problems, results),
            infra_error=next((r.content for r in results if r.error is ToolErrorKind.INFRA), None),
            turn=self.turn,
            **extra,
        )
        return copy_messages(obs), float(reward), terminated, truncated, info

    async def acall(self, call: ToolCall) -> tuple[ToolResult, float, bool, bool]:
        """One tool call as a whole turn, for a client that calls tools directly (an MCP
        client of `toolgym serve mcp`): (its result, reward, terminated, truncated). It counts
        against `max_turns`, is scored by `outcome`, and, as `astep`, is refused
        (EpisodeOverError) once the episode is over: a client gets no second verdict."""
        self._begin_turn(self.parser.render([call]))
        call.id = f"call_{self.turn}_0"
        results, outcome, reward = await self._run_calls([call])
        obs = clean_messages([results[0].to_message(), *await self.observe()])
        terminated, truncated = await self._close_turn(outcome, obs)
        self._result = None
        return results[0], reward, terminated, truncated

    def _begin_turn(self, action: str) -> None:
        if self.turn is None or self.done:
            raise EpisodeOverError(
                f"{type(self).__name__}.step() needs reset() first (the episode is over or not started)"
            )
        self.turn += 1
        self.transcript.append({"role": "assistant", "content": action})

    async def _close_turn(self, outcome: Outcome, obs: list[Message]) -> tuple[bool, bool]:
        """Close the turn: (terminated, truncated), the episode's end, the transcript."""
        assert self.turn is not None
        terminated = outcome.terminated
        truncated = not terminated and self.turn >= self.max_turns
        self.done = terminated or truncated
        self._last_obs = obs
        self.transcript += copy_messages(obs)
        if self.done:
            await self.on_episode_end()
        return terminated, truncated

    async def _run_calls(
        self, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolResult], Outcome, float]:
        results: list[ToolResult] = []
        outcome, reward = Outcome(), 0.0
        for call in calls:
            if outcome.terminated:
                results.append(
                    ToolResult(call, "Not run: the episode already ended.", ToolErrorKind.NOT_RUN)
                )
                continue
            results.append(await self.toolset.call(call, self.injections()))
            outcome = self.outcome()
            reward += outcome.reward
        return results, outcome, reward

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m['content']}" for m in self.transcript)


def _call_record(result: ToolResult) -> dict[str, Any]:
    return {**result.call.to_dict(), "error": result.error.value if result.error else None}


def _error_text(problems: list[str], results: list[ToolResult]) -> str | None:
    texts = problems + [r.content for r in results if r.error is not None]
    return clean_text(clip("\n".join(clip_list(texts, MAX_ERRORS)), FEEDBACK_CHARS)) or None


def _images_message(results: list[ToolResult]) -> Message:
    """The pictures tools returned this turn, in one user message after their results (a
    chat template renders images in user turns)."""
    named = ", ".join(f"{r.call.name} ({r.call.id})" for r in results if r.images)
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"Images returned by {named}:"}]
    for result in results:
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in result.images]
    return {"role": "user", "content": parts}


def _summary(description: str) -> str:
    """A tool's description's first paragraph on one line (a docstring may wrap it)."""
    return " ".join(description.split("\n\n")[0].split())
