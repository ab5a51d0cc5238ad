"""toolgym/ProposeTextWorld-v0: the proposer's side of text-game self-play: a model designs a
game as a spec (specs.py) that TextWorld builds.

Observation: the spec format, example specs the reset task carries ("examples": pool tasks,
    whose instructions are specs; without them, two made from seeds), and the request for a
    new game.
Action (tags): <spec>{...}</spec>, one JSON game spec; the episode ends with it.
Result: a ProposedTask (kind "textworld") whose instruction is the spec as compact JSON and
    whose `check` holds the parsed spec and its walkthrough's length, or why no game came of
    it: JSON that does not parse, a spec refused by its checks (sizes, names, links, a locked
    door with no key, an unreachable room) or by the planner (a goal it cannot reach within
    its bounds), or a build that ran past `build_timeout_s`. The game is built once, in the
    game worker, into `cache_dir`, where the solvers' TextWorld-v0 finds it. Whether the task
    is valid is the self-play builder's to say (training/selfplay/domains/textworld.py).
Reward: 0 (the builder pays the proposer from its solvers' results).
Episode end: terminated by a spec; truncated after `max_turns` turns.
Arguments: max_turns (default 2: a malformed turn gets one more), cache_dir (default
    TextWorld-v0's), build_timeout_s, plus ToolEnv's.
Scripted proposer: writes spec_maker.py's spec of the reset's seed, for demonstrations.
Versions: v0, first release.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolgym.envs.tasks import SeedTasks, TaskSource
from toolgym.envs.tasks.proposed import MAX_INSTRUCTION_CHARS, example_lines, example_tasks
from toolgym.envs.textworld.env import default_cache_dir
from toolgym.envs.textworld.process import GameError, GameProcess
from toolgym.envs.textworld.spec_maker import random_spec
from toolgym.envs.textworld.specs import parse_spec
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError, one_line
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import InfraError, tool

TAGS = {"spec": ("spec", "text")}
MAX_EXAMPLES = 3
OWN_EXAMPLES = 2
"""Examples shown when the reset task brings none (a pool's are the same shape), so a
demonstration's prompt looks like a self-play step's."""
FORMAT = (
    'A spec is JSON: {"name", "rooms": [names], "start": room, "links": [{"from", "direction" '
    '(north/south/east/west), "to", "door"?: {"name", "state": open/closed/locked, "key"?}}], '
    '"containers"?: [{"name", "room", "state", "key"?}], "supporters"?: [{"name", "room"}], '
    '"objects": [{"name", "kind"?: object/key/food, "in": room, container, supporter or '
    'inventory}], "goal": [one or more of {"holding": x}, {"in": [x, container]}, {"on": [x, '
    'supporter]}, {"at": room}, {"open": x}, {"closed": x}, {"locked": x}, {"eaten": food}]}. '
    "Names are plain lowercase words."
)


class ProposeTextWorldEnv(ToolEnv):
    instructions = (
        "Design a new text adventure game that a player can win but has to think about. "
        "Write it as one JSON game spec inside <spec> and </spec>."
    )

    def __init__(
        self,
        max_turns: int = 2,
        cache_dir: str | Path | None = None,
        build_timeout_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser", XmlTagParser(TAGS))
        kwargs.setdefault("max_calls_per_turn", 1)
        super().__init__(max_turns=max_turns, **kwargs)
        if build_timeout_s <= 0:
            raise ConfigError(f"build_timeout_s {build_timeout_s}: it must be positive")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.build_timeout_s = build_timeout_s
        self.process = GameProcess(self.shared)
        self.hidden: dict[str, Any] = {}
        self.proposed = False

    def task_source(self) -> TaskSource:
        return SeedTasks()

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        given = dict((options or {}).get("task") or {})
        self.hidden, self.proposed = random_spec(task_seed), False
        examples = given.get("examples")
        if examples is None:  # played alone (sft, eval): examples of its own, as a pool shows
            examples = [{"instruction": compact(random_spec(task_seed + k + 1))}
                        for k in range(OWN_EXAMPLES)]  # fmt: skip
        texts = example_lines(example_tasks(examples, MAX_EXAMPLES, 800))  # a spec is its own
        shown = "\n\nExample specs:\n" + "\n".join(texts) if texts else ""
        return [{"role": "user", "content": f"{FORMAT}{shown}\n\nWrite a new game spec."}]

    @tool
    async def spec(self, text: str) -> str:
        """Submit the game's spec (JSON); it is built into a game, and the episode ends.

        Args:
            text: one JSON object, e.g. {"name": "heist", "rooms": ["hall"], ...}.
        """
        text = str(text).strip()
        check: dict[str, Any] = {"spec": None, "steps": 0, "error": None}
        instruction = text[:MAX_INSTRUCTION_CHARS] or "(empty)"
        try:
            if len(text) > MAX_INSTRUCTION_CHARS:  # refused before it is read
                raise ConfigError(f"the spec is over {MAX_INSTRUCTION_CHARS} characters")
            parsed = parse_spec(json.loads(text))
            check["spec"] = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
            instruction = compact(check["spec"])
            made = await self.process.request(
                {"op": "build", "spec": check["spec"], "cache": str(self.cache_dir)},
                self.build_timeout_s,
            )
            check["steps"] = len(made["walkthrough"])
        except (ValueError, ConfigError, GameError, InfraError) as exc:
            check["error"] = one_line(str(exc), 300)
        self.hand_back({"kind": "textworld", "instruction": instruction, "check": check})
        self.proposed = True
        if check["error"]:
            return f"Not a game: {check['error']}"
        return f"Built: {check['steps']} steps to win."

    def outcome(self) -> Outcome:
        return Outcome(0.0, True) if self.proposed else Outcome()

    def scripted_action(self) -> str | None:
        """Write the seed's spec (spec_maker.py)."""
        if not self.hidden or self.proposed:
            return None
        return self.parser.render([ToolCall("spec", {"text": compact(self.hidden)})])

    async def aclose(self) -> None:
        await self.process.close()
        await super().aclose()


def compact(spec: dict[str, Any]) -> str:
    """A spec as one line of JSON, as a proposer writes it and a pool shows it."""
    return json.dumps(spec, separators=(",", ":"))
