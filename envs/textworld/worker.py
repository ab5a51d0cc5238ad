"""The game worker: one process per env instance that runs TextWorld (its generator and the
Z-machine interpreter, Jericho's Frotz, a C library). A game that hangs or crashes the
interpreter then takes down this process, not the trainer: the env sees it die or time out
and masks the episode (process.py). Workers are forked from a host that has TextWorld loaded
(host.py), so one starts in milliseconds.

Protocol: one JSON object per line on stdin, one answer per line on stdout:
    {"op": "generate", "settings": {...}, "cache": DIR}  -> {"path": ...}
    {"op": "build", "spec": {...}, "path": GAME}          -> {"path": ..., "walkthrough": [...]}
    {"op": "build", "spec": {...}, "cache": DIR}          -> the same, the game kept in the cache
    {"op": "open", "path": GAME}                          -> a frame (the game's start)
    {"op": "step", "command": TEXT}                       -> a frame
and {"error": TEXT} for a request that failed. A frame is the game's state as plain data.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from pathlib import Path
from typing import Any, TextIO

from toolgym.errors import ConfigError

FEEDBACK_CHARS = 20_000
LIST_ITEMS = 500
HALTED = "Emulator halted"


def requested_infos() -> Any:
    """What the env reads from TextWorld each step."""
    from textworld import EnvInfos

    return EnvInfos(
        admissible_commands=True, score=True, max_score=True, won=True, lost=True,
        facts=True, objective=True, description=True, inventory=True,
        policy_commands=True, extras=["walkthrough"],
    )  # fmt: skip


class Worker:
    def __init__(self) -> None:
        self.game: Any = None

    def generate(self, settings: dict[str, Any], cache: str) -> dict[str, Any]:
        from toolgym.envs.textworld.generate import cached_game
        from toolgym.envs.textworld.settings import GameSettings

        return {"path": str(cached_game(GameSettings.parse(settings), Path(cache)))}

    def build(self, spec: dict[str, Any], path: str | None, cache: str | None) -> dict[str, Any]:
        from toolgym.envs.textworld.build import SpecRefused, build_to, cached_spec_game
        from toolgym.envs.textworld.specs import parse_spec

        try:
            if cache is not None:
                return cached_spec_game(parse_spec(spec), Path(cache))
            return build_to(parse_spec(spec), Path(str(path)))
        except (SpecRefused, ConfigError) as exc:
            return {"error": str(exc), "refused": True}

    def open(self, path: str) -> dict[str, Any]:
        import textworld

        if self.game is not None:
            self.game.close()
            self.game = None
        self.game = textworld.start(path, request_infos=requested_infos())
        return self._frame(self.game.reset())

    def step(self, command: str) -> dict[str, Any]:
        if self.game is None:
            return {"error": "no game is open"}
        if not command.isascii() or not command.isprintable() or len(command) > 1000:
            return {"error": "a command is one line of printable ASCII"}
        state, _, _ = self.game.step(command)
        return self._frame(state)

    def _frame(self, state: Any) -> dict[str, Any]:
        feedback = str(state.feedback or "")
        facts = sorted(str(f) for f in (state.facts or []))
        return {
            "feedback": feedback[:FEEDBACK_CHARS],
            "objective": str(state.objective or "")[:FEEDBACK_CHARS],
            "description": str(state.description or "")[:FEEDBACK_CHARS],
            "inventory": str(state.inventory or "")[:FEEDBACK_CHARS],
            "score": int(state.score or 0),
            "max_score": int(state.max_score or 0),
            "won": bool(state.won),
            "lost": bool(state.lost),
            "halted": HALTED in feedback,
            "admissible": list(state.admissible_commands or [])[:LIST_ITEMS],
            "policy": list(state.policy_commands or [])[:LIST_ITEMS],
            "walkthrough": list(state.get("extra.walkthrough") or [])[:LIST_ITEMS],
            "state": hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16],
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "generate":
            return self.generate(request["settings"], request["cache"])
        if op == "build":
            return self.build(request["spec"], request.get("path"), request.get("cache"))
        if op == "open":
            return self.open(request["path"])
        if op == "step":
            return self.step(str(request["command"]))
        return {"error": f"unknown op {op!r}"}


def serve(requests: TextIO, answers: TextIO) -> None:
    worker = Worker()
    for line in requests:
        try:
            answer = worker.handle(json.loads(line))
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
