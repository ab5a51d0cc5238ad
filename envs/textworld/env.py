"""toolgym/TextWorld-v0: text adventure games made by TextWorld's generator on this machine
(or your own TextWorld games), played one command per turn.

Observation: the goal, the starting room and what you carry; after each command, the game's
    answer (cut to `max_chars`). With `admissible_commands=True` each observation ends with
    the commands the game accepts in that state (ALFWorld's and GiGPO's setting).
Actions: one command per turn, `<command>go east</command>` by default (pass parser="hermes"
    for a `command` tool call). Commands are plain words; out-of-game verbs (quit, restart,
    save, undo, ...), chained commands and anything that is not plain text are refused with
    the reason and never reach the game.
Reward: the game's score gained by the step over its max score, so a won game returns 1.
    Solved when the game is won (points scored in a lost game are not a success).
Episode end: terminated when the game is won or lost; truncated after `max_turns` turns.
state_key: a digest of the game's own state (TextWorld's facts: where you are, what you
    carry, what is open, cooked, ...), never the text, so GiGPO's anchor groups are the
    game's real states.
Tasks: generated games (`game`: GameSettings' family, knobs; a task {"seed": s} is game s of
    those settings; splits are disjoint seed ranges, or with `pool` ({train: N, eval: M})
    a fixed number of games each, seeds in a row), compiled once into `cache_dir`; or
    `games`, a folder of compiled TextWorld games (.z8 with their .json); or `tasks`, JSONL
    rows naming a game file ({"game": PATH}), generation settings ({"family": ..., "seed":
    ..., ...}) or a game spec ({"spec": {...}}, specs.py; built once into `cache_dir`).
Infrastructure: each instance runs its games in a worker process (worker.py); a game that
    does not compile, an interpreter that halts, crashes or hangs flags the step
    `infra_error` (masked from training).
Scripted solver: TextWorld's winning policy from the current state (the walkthrough at the
    start), for demonstrations.
Arguments: game (settings mapping), games, tasks, pool, admissible_commands, max_turns,
    max_chars, solver_slips (the share of episodes in which the scripted solver takes one
    detour, an admissible command off its winning policy, at a random step: a weaker
    demonstrator, whose SFT student RL can then surpass),
    cache_dir (default $TOOLGYM_TEXTWORLD_CACHE, else ~/.cache/toolgym/textworld),
    step_timeout_s, generate_timeout_s, plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.tasks import SPLITS, ListTasks, SeedTasks, TaskSource, choose_task
from toolgym.envs.textworld.commands import clean_feedback, normalize, refusal
from toolgym.envs.textworld.games import game_files, game_path
from toolgym.envs.textworld.process import GameError, GameProcess
from toolgym.envs.textworld.settings import GameSettings
from toolgym.envs.textworld.specs import parse_spec
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.text import clip
from toolgym.tools.tool import InfraError, ToolCallError, tool

TAGS = {"command": ("command", "text")}
LISTED_COMMANDS = 60
INSTALL = "pip install 'toolgym[textworld]'"


def seed_pool(pool: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]:
    """`pool`'s games per split as seed tasks: seeds from 0 on, train first, then eval,
    then test (the games `toolgym textworld generate --count N --eval M` writes)."""
    if not isinstance(pool, Mapping) or not pool:
        raise ConfigError("pool is games per split, e.g. {train: 300, eval: 128}")
    unknown = sorted(set(pool) - set(SPLITS))
    if unknown:
        raise ConfigError(f"pool: unknown split {unknown[0]!r} (splits: {', '.join(SPLITS)})")
    splits, first = {}, 0
    for split in SPLITS:
        count = pool.get(split, 0)
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10**6:
            raise ConfigError(f"pool: {split} {count!r} is not a number of games (0 to 10^6)")
        if count:
            splits[split] = [{"seed": seed} for seed in range(first, first + count)]
        first += count
    return splits


def default_cache_dir() -> Path:
    configured = os.environ.get("TOOLGYM_TEXTWORLD_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "toolgym" / "textworld"


class TextWorldEnv(ToolEnv):
    instructions = (
        "You are playing a text adventure. Reach the goal you are given. Each turn, send one "
        "command, e.g. <command>go north</command>, <command>take key</command>, "
        "<command>open chest</command>, <command>look</command>, <command>inventory</command>."
    )

    def __init__(
        self,
        game: Mapping[str, Any] | None = None,
        games: str | Path | None = None,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        pool: Mapping[str, int] | None = None,
        admissible_commands: bool = False,
        max_turns: int = 20,
        max_chars: int = 2000,
        cache_dir: str | Path | None = None,
        step_timeout_s: float = 10.0,
        generate_timeout_s: float = 300.0,
        solver_slips: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if importlib.util.find_spec("textworld") is None:
            raise ConfigError(f"TextWorld games need the textworld package: {INSTALL}")
        kwargs.setdefault("parser", XmlTagParser(TAGS))
        kwargs.setdefault("max_calls_per_turn", 1)
        super().__init__(max_turns=max_turns, **kwargs)
        if sum(x is not None for x in (games, tasks, pool)) > 1:
            raise ConfigError("give one of `games` (a folder), `tasks` (JSONL) or `pool`")
        self.settings = GameSettings.parse(dict(game or {}), "game")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.tasks: ListTasks | None = None
        self.base = Path.cwd()
        if games is not None:  # games named relative to their folder
            self.base = Path(games).resolve()
            self.tasks = ListTasks.load([{"game": name} for name in game_files(self.base)])
        elif tasks is not None:
            if isinstance(tasks, str | Path):
                self.base = Path(tasks).resolve().parent
            self.tasks = ListTasks.load(tasks, check=self._check_task)
        elif pool is not None:
            self.tasks = ListTasks(seed_pool(pool))
        self.admissible_commands, self.max_chars = admissible_commands, max_chars
        self.step_timeout_s, self.generate_timeout_s = step_timeout_s, generate_timeout_s
        if not 0.0 <= solver_slips <= 1.0:
            raise ConfigError(f"solver_slips {solver_slips}: it must be between 0 and 1")
        self.solver_slips = solver_slips
        self.slip_turn: int | None = None
        self.process = GameProcess(self.shared)
        self.frame: dict[str, Any] = {}
        self.game_file = ""
        self.returned, self.step_reward = 0.0, 0.0

    # ----- tasks -----------------------------------------------------------------------------
    def task_source(self) -> TaskSource:
        return self.tasks if self.tasks is not None else SeedTasks()

    def _check_task(self, task: Mapping[str, Any]) -> None:
        if "game" in task:
            game_path(task["game"], self.base)
        elif "spec" in task:
            parse_spec(task["spec"])
        else:
            self._task_settings(task)

    def _task_settings(self, task: Mapping[str, Any]) -> GameSettings:
        fields = {k: v for k, v in task.items() if k != "split"}
        return GameSettings.parse(self.settings.model_dump() | fields, "the task's game settings")

    async def _game_file(self, task: Mapping[str, Any]) -> str:
        if "game" in task:
            try:
                return str(game_path(task["game"], self.base))
            except ConfigError as exc:
                raise InfraError(str(exc)) from None
        if "spec" in task:
            return await self._spec_game(task["spec"])
        settings = self._task_settings(task)
        try:
            made = await self.process.request(
                {"op": "generate", "settings": settings.model_dump(), "cache": str(self.cache_dir)},
                self.generate_timeout_s,
            )
        except GameError as exc:
            raise InfraError(
                f"the game {settings.knobs()} seed {settings.seed} could not be made: {exc}"
            ) from None
        return str(made["path"])

    async def _spec_game(self, spec: Any) -> str:
        """A game spec's game (built once into the cache); one that is refused, or whose
        build fails, is the infrastructure's error: its task should not have been given."""
        try:
            made = await self.process.request(
                {"op": "build", "spec": spec, "cache": str(self.cache_dir)}, self.generate_timeout_s
            )
        except GameError as exc:
            raise InfraError(f"the game spec could not be built: {exc}") from None
        return str(made["path"])

    # ----- the episode -----------------------------------------------------------------------
    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(task_seed, options, self.tasks, lambda s: {"seed": s})
        path = await self._game_file(task)
        self.frame, self.game_file = {}, path
        try:
            frame = await self.process.request({"op": "open", "path": path}, self.step_timeout_s)
        except GameError as exc:
            raise InfraError(f"the game {path} cannot be played: {exc}") from None
        self._check_alive(frame)
        self.frame, self.returned, self.step_reward = frame, 0.0, 0.0
        chooser = random.Random(f"slip-{task_seed}-{path}")
        slipped = chooser.random() < self.solver_slips and frame["walkthrough"]
        self.slip_turn = chooser.randrange(len(frame["walkthrough"])) if slipped else None
        parts = [frame["objective"], frame["description"], frame["inventory"]]
        opening = "\n\n".join(clip(clean_feedback(p), self.max_chars) for p in parts if p.strip())
        return [{"role": "user", "content": opening + self._listed()}]

    @tool
    async def command(self, text: str) -> str:
        """Send one command to the game.

        Args:
            text: the command, e.g. "go north", "take key from chest", "open door".
        """
        if not self.frame:
            raise InfraError("no game is running")
        why = refusal(text)
        if why is not None:
            raise ToolCallError(why)
        try:
            frame = await self.process.request(
                {"op": "step", "command": normalize(text)}, self.step_timeout_s
            )
        except GameError as exc:
            raise InfraError(f"the game failed: {exc}") from None
        self._check_alive(frame)
        self.step_reward = self._gain(frame)
        self.frame = frame
        return clip(clean_feedback(frame["feedback"]), self.max_chars) + self._listed()

    def outcome(self) -> Outcome:
        reward, self.step_reward = self.step_reward, 0.0
        ended = bool(self.frame.get("won") or self.frame.get("lost"))
        return Outcome(reward, ended, solved=bool(self.frame.get("won")))

    def state_key(self) -> Hashable:
        return "tw:" + str(self.frame.get("state", "none"))

    def scripted_action(self) -> str | None:
        """The winning policy's next command; in a slipped episode, a detour at one step."""
        policy = self.frame.get("policy") or []
        if not policy:
            return None
        if self.slip_turn is not None and self.turn == self.slip_turn:
            return self.mistake_action(random.Random(f"detour-{self.game_file}-{self.turn}"))
        return self.parser.render([ToolCall("command", {"text": policy[0]})])

    def mistake_action(self, rng: random.Random) -> str | None:
        """An admissible command the winning policy would not take now."""
        policy = self.frame.get("policy") or []
        others = [c for c in self.frame.get("admissible") or [] if c not in policy[:1]]
        choice = rng.choice(others) if others else "look"
        return self.parser.render([ToolCall("command", {"text": choice})])

    def walkthrough(self) -> list[str]:
        """The game's own walkthrough (the winning commands from the start)."""
        return list(self.frame.get("walkthrough") or [])

    async def aclose(self) -> None:
        await self.process.close()
        await super().aclose()

    # ----- helpers ---------------------------------------------------------------------------
    def _gain(self, frame: dict[str, Any]) -> float:
        """This step's share of the game's max score; the rest of 1 at a win."""
        if frame["won"]:
            reward = 1.0 - self.returned
        elif frame["max_score"] > 0:
            reward = (frame["score"] - self.frame["score"]) / frame["max_score"]
        else:
            reward = 0.0
        self.returned += reward
        return reward

    def _check_alive(self, frame: dict[str, Any]) -> None:
        if frame["halted"]:
            self.frame = {}
            raise InfraError(f"the game interpreter halted: {clip(frame['feedback'], 300)}")

    def _listed(self) -> str:
        if not self.admissible_commands:
            return ""
        commands = list(self.frame.get("admissible") or [])
        shown = ", ".join(commands[:LISTED_COMMANDS])
        more = (
            f" (and {len(commands) - LISTED_COMMANDS} more)"
            if len(commands) > LISTED_COMMANDS
            else ""
        )
        return f"\n\nAdmissible commands: {clip(shown, self.max_chars)}{more}"
