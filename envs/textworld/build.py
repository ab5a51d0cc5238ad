"""A game spec (specs.py) made into a TextWorld game: GameMaker lays out the world, then a
breadth-first search over TextWorld's own rules (its knowledge base: the same actions the game
accepts) finds the shortest way to the goal, which becomes the quest and its walkthrough. A
goal the search cannot reach within its bounds is refused with that reason. Runs in the game
worker."""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from pathlib import Path
from typing import Any

import textworld
from textworld import GameMaker
from textworld.generator.game import Event, Quest

from toolgym.envs.textworld.generate import cached, compile_to
from toolgym.envs.textworld.specs import OPPOSITE, GameSpec

MAX_STATES = 20_000
MAX_SEARCH_S = 20.0
TYPES = {"object": "o", "key": "k", "food": "f"}


class SpecRefused(Exception):
    """The spec builds no winnable game; the message says why."""


def build_game(spec: GameSpec) -> Any:
    maker = GameMaker()
    rooms = {name: maker.new_room(name) for name in spec.rooms}
    entities: dict[str, Any] = dict(rooms)
    locks: list[tuple[Any, str | None, str]] = []
    for link in spec.links:
        source, target = rooms[link.source], rooms[link.target]
        path = maker.connect(
            getattr(source, link.direction), getattr(target, OPPOSITE[link.direction])
        )
        if link.door is not None:
            door = maker.new_door(path, name=link.door.name)
            door.add_property(link.door.state)
            entities[link.door.name] = door
            locks.append((door, link.door.key, link.door.name))
    for box in spec.containers:
        container = maker.new(type="c", name=box.name)
        container.add_property(box.state)
        rooms[box.room].add(container)
        entities[box.name] = container
        locks.append((container, box.key, box.name))
    for top in spec.supporters:
        supporter = maker.new(type="s", name=top.name)
        rooms[top.room].add(supporter)
        entities[top.name] = supporter
    for thing in spec.objects:
        entities[thing.name] = maker.new(type=TYPES[thing.kind], name=thing.name)
    for thing in spec.objects:
        holder = maker.inventory if thing.place == "inventory" else entities[thing.place]
        holder.add(entities[thing.name])
    for lock, key, _ in locks:
        if key is not None:
            maker.add_fact("match", entities[key], lock)
    maker.set_player(rooms[spec.start])
    entities["inventory"] = maker.inventory
    goal = []
    for condition in spec.goal:
        kind, names = condition.fact()
        if kind == "holding":
            goal.append(maker.new_fact("in", entities[names[0]], maker.inventory))
        elif kind == "at":
            goal.append(maker.new_fact("at", maker.player, entities[names[0]]))
        else:
            goal.append(maker.new_fact(kind, *(entities[n] for n in names)))
    try:
        maker.validate()
    except Exception as exc:
        raise SpecRefused(
            f"TextWorld refuses the world: {' '.join(str(exc).split())[:300]}"
        ) from None
    plan = shortest_plan(maker.build(), goal)
    maker.quests = [Quest(win_events=[Event(actions=plan, conditions=goal)])]
    game = maker.build()  # again: the objective is written from the quest
    game.metadata["walkthrough"] = list(game.walkthrough or [])
    return game


def shortest_plan(game: Any, goal: list[Any]) -> list[Any]:
    """The fewest actions from the start to a state where every goal fact holds."""
    rules = list(game.kb.rules.values())
    mapping = game.kb.types.constants_mapping
    start = game.world.state.copy()
    if all(start.is_fact(fact) for fact in goal):
        raise SpecRefused("the goal already holds at the start")
    deadline = time.monotonic() + MAX_SEARCH_S
    seen = {frozenset(start.facts)}
    queue: deque[tuple[Any, list[Any]]] = deque([(start, [])])
    while queue:
        if len(seen) > MAX_STATES or time.monotonic() > deadline:
            raise SpecRefused(
                f"the goal was not reached within {MAX_STATES} states or {MAX_SEARCH_S:g} s of search"
            )
        state, plan = queue.popleft()
        for action in state.all_applicable_actions(rules, mapping):
            after = state.copy()
            after.apply(action)
            key = frozenset(after.facts)
            if key in seen:
                continue
            if all(after.is_fact(fact) for fact in goal):
                return [*plan, action]
            seen.add(key)
            queue.append((after, [*plan, action]))
    raise SpecRefused(f"the goal cannot be reached from the start ({len(seen)} states searched)")


def build_to(spec: GameSpec, path: Path) -> dict[str, Any]:
    """Compile the spec's game to `path`; its walkthrough."""
    game = build_game(spec)
    compile_to(game, path)
    return {"path": str(path), "walkthrough": game.metadata["walkthrough"]}


def cached_spec_game(spec: GameSpec, cache_dir: Path) -> dict[str, Any]:
    """The spec's game in the cache (keyed by the spec and TextWorld's version), built on the
    first call for it; its path and walkthrough. A spec task replayed by many episodes, or a
    proposed game its solvers play, is planned and compiled once."""
    payload = json.dumps([spec.model_dump(mode="json"), textworld.__version__], sort_keys=True)
    key = hashlib.sha256(payload.encode()).hexdigest()[:20]
    target = cached(
        cache_dir / "spec" / f"spec-{key}.z8", lambda to: compile_to(build_game(spec), to)
    )
    metadata = json.loads(target.with_suffix(".json").read_text()).get("metadata", {})
    return {"path": str(target), "walkthrough": list(metadata.get("walkthrough", []))}
