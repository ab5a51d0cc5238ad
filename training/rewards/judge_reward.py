"""A judge as a reward source (`source: judge`): a language model that scores each step (with
`scores: process`) or each whole trajectory (`per: trajectory`, an outcome) against a rubric.

Any engine serves: an OpenAI-compatible chat endpoint (`base_url`: `toolgym serve model`,
vLLM, a hosted API with its key in the environment variable `api_key_env`), or a model
directory on the in-process engine (`model`). The step's requests go out together, at most
`concurrency` at once, each within `timeout_s`; answers are cached by their prompt, so a
step the judge has seen (a replayed prefix, a repeated state) costs nothing the second time.

The judge answers with a number from 0 to `scale`, read as the first number in its reply
and divided by `scale`. A judge that fails (an error, a timeout, a reply with no number in
range) says nothing about the policy: that trajectory is masked (left out of training, as
any infrastructure failure), never scored 0. A step where every trajectory was masked stops
the run.

Everything the policy wrote reaches the judge bounded: each action and observation is cut
to `max_chars` / 4 characters, and the history to the last `max_chars`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.config import ConfigModel, validate
from toolgym.errors import ConfigError, one_line
from toolgym.training.rewards.base import RunContext
from toolgym.training.rewards.prepared import PreparedScores

RUBRIC = (
    "A good step moves the task towards its goal: it uses the tools correctly, acts on what "
    "earlier results said, and does not repeat what already failed."
)
CACHE_ENTRIES = 100_000
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class JudgeSettings(ConfigModel):
    """The settings of `{source: judge, kwargs: {...}}`, a language model scoring steps or
    trajectories against a rubric (training/rewards/judge_reward.py)."""

    base_url: str | None = None
    """An OpenAI-compatible server's URL (e.g. http://127.0.0.1:8000/v1), or None with `model`."""
    served_model: str = "default"
    """The judge's model name on that server."""
    api_key_env: str | None = None
    """The environment variable holding the server's API key (hosted APIs)."""
    model: str | None = None
    """A model directory to judge with on the in-process engine, instead of a server."""
    rubric: str = RUBRIC
    """What a good step (or trajectory) is, in the judge's words."""
    per: Literal["step", "trajectory"] = "step"
    """step: one score per step (a process reward); trajectory: one for the whole episode,
    given to its last step (an outcome)."""
    scale: float = Field(10.0, gt=0)
    """The judge answers from 0 to this; the reward is the answer divided by it."""
    max_tokens: int = Field(16, ge=1)
    """The judge's reply length."""
    temperature: float = Field(0.0, ge=0)
    """The judge's sampling temperature (0: its most likely answer)."""
    concurrency: int = Field(16, ge=1)
    """Requests in flight at once."""
    timeout_s: float = Field(60.0, gt=0)
    """Wall-clock limit of one request; past it the trajectory is masked."""
    max_chars: int = Field(6000, ge=200)
    """The most characters of history a request carries."""

    @field_validator("base_url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return url

    @field_validator("model")
    @classmethod
    def _directory(cls, model: str | None) -> str | None:
        if model is not None and not Path(model).is_dir():
            raise ValueError(f"no model directory at {model}")
        return model


class JudgeReward(PreparedScores):
    source_name = "judge"
    Settings = JudgeSettings

    def __init__(self, context: RunContext, **settings: Any) -> None:
        super().__init__()
        self.settings = s = validate(self.Settings, settings)
        if (s.base_url is None) == (s.model is None):
            raise ConfigError("give base_url (a server) or model (in-process), one of them")
        if s.base_url is not None:
            from toolgym.agents.writer import ChatWriter

            key = os.environ.get(s.api_key_env) if s.api_key_env else None
            if s.api_key_env and not key:
                raise ConfigError(f"the environment variable {s.api_key_env} is not set")
            self.writer: Any = ChatWriter(s.base_url, s.served_model, api_key=key)
        else:
            from toolgym.agents.writer import EngineWriter

            try:
                self.writer = EngineWriter.load(str(s.model))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot load {s.model}: {one_line(exc)}") from None
        self.cache: OrderedDict[str, float] = OrderedDict()

    # ----- the reward-source contract ------------------------------------------------------
    async def prepare(
        self, groups: Sequence[TrajectoryGroup], returns: Sequence[Sequence[float]] | None
    ) -> None:
        """Ask the judge about every unmasked trajectory of the step; mask those it failed on."""
        t0 = time.perf_counter()
        kept = [t for g in groups for t in g.trajectories if not t.masked and t.steps]
        prompts = {t.id: self.prompts(t) for t in kept}
        asked = {key: messages for p in prompts.values() for key, messages in p}
        fresh = {k: m for k, m in asked.items() if k not in self.cache}
        answers = await self._ask_all(fresh) if fresh else {}
        failed = 0
        self.scores = {}
        for t in kept:
            keys = [key for key, _ in prompts[t.id]]
            errors = [answers[k] for k in keys if isinstance(answers.get(k), str)]
            if errors:
                t.infra_error = f"judge: {errors[0]}"
                failed += 1
                continue
            values = [float(answers[k]) if k in answers else self.cache[k] for k in keys]
            if self.settings.per == "trajectory":
                values = [0.0] * (len(t.steps) - 1) + values
            self.scores[t.id] = values
        self.last_metrics = {
            "requests": float(len(fresh)),
            "cached": float(len(asked) - len(fresh)),
            "failed": float(failed),
            "seconds": time.perf_counter() - t0,
        }

    async def aclose(self) -> None:
        await self.writer.aclose()

    # ----- the requests --------------------------------------------------------------------
    def prompts(self, trajectory: Trajectory) -> list[tuple[str, list[dict[str, str]]]]:
        """(cache key, chat messages) for each judgement the trajectory needs."""
        s = self.settings
        part = s.max_chars // 4
        task = _cut(
            "\n".join(str(m.get("content", "")) for m in trajectory.messages if m.get("content")),
            part,
        )
        lines = []
        for k, step in enumerate(trajectory.steps):
            result = " ".join(str(m.get("content", "")) for m in step.observation)
            lines.append(f"Step {k + 1}: {_cut(step.action, part)}\nResult: {_cut(result, part)}")
        if s.per == "trajectory":
            asks = [(len(lines), "Rate the whole attempt: how well does it accomplish the task?")]
        else:
            asks = [(k + 1, f"Rate step {k + 1} only.") for k in range(len(lines))]
        out = []
        for upto, question in asks:
            history = "\n".join(lines[:upto])[-(s.max_chars - part) :]
            user = (
                f"Task:\n{task}\n\nWhat the agent did:\n{history}\n\n{question} "
                f"Reply with a number from 0 to {s.scale:g} and nothing else."
            )
            messages = [
                {"role": "system", "content": f"You judge an agent's work. {s.rubric}"},
                {"role": "user", "content": user},
            ]
            key = hashlib.sha256(json.dumps(messages).encode()).hexdigest()
            out.append((key, messages))
        return out

    async def _ask_all(self, asked: dict[str, list[dict[str, str]]]) -> dict[str, float | str]:
        """Each prompt's score (into the cache), or the reason it has none."""
        limit = asyncio.Semaphore(self.settings.concurrency)

        async def ask(key: str, messages: list[dict[str, str]]) -> tuple[str, float | str]:
            async with limit:
                try:
                    async with asyncio.timeout(self.settings.timeout_s):
                        reply = await self.writer.write(
                            messages, self.settings.max_tokens, self.settings.temperature, seed=0
                        )
                except TimeoutError:
                    return key, f"no answer within {self.settings.timeout_s:g} s"
                except Exception as exc:
                    return key, one_line(f"{type(exc).__name__}: {exc}")
            score = self.parse(reply)
            if score is None:
                return key, f"no score from 0 to {self.settings.scale:g} in {reply[:80]!r}"
            self.cache[key] = score
            if len(self.cache) > CACHE_ENTRIES:
                self.cache.popitem(last=False)
            return key, score

        return dict(await asyncio.gather(*(ask(k, m) for k, m in asked.items())))

    def parse(self, reply: str) -> float | None:
        """The first number in the reply, divided by `scale`; None when there is none in range."""
        match = NUMBER.search(reply or "")
        if match is None:
            return None
        value = float(match.group())
        return value / self.settings.scale if 0 <= value <= self.settings.scale else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
