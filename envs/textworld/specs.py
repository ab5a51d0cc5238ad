"""Games a user or a model designs: a typed spec (rooms and the links between them, doors and
containers with their keys, objects, the goal) that TextWorld turns into a game (build.py).
Everything that can be checked without TextWorld is checked here, with the reason, before any
work: sizes, names, links, a locked door with no key, a room the start cannot reach. Whether
the goal can be reached at all is the planner's question (build.py). A spec from a model is
hostile input: names become Inform 7 source, so they are plain words only."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolgym.errors import ConfigError

MAX_ROOMS = 30
MAX_THINGS = 60
MAX_GOAL = 8
NAME = re.compile(r"[a-z][a-z0-9 -]{0,31}")
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
Direction = Literal["north", "south", "east", "west"]
Lock = Literal["open", "closed", "locked"]


def _plain_name(name: str) -> str:
    name = " ".join(name.split())
    if not NAME.fullmatch(name):
        raise ValueError(
            f"{name[:40]!r} is not a plain name: lower-case letters, digits, spaces and "
            "hyphens, starting with a letter, at most 32 characters"
        )
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Door(_Strict):
    name: str
    state: Lock = "closed"
    key: str | None = None

    _name = field_validator("name", "key")(lambda v: v if v is None else _plain_name(v))


class Link(_Strict):
    source: str = Field(alias="from")
    direction: Direction
    target: str = Field(alias="to")
    door: Door | None = None

    _name = field_validator("source", "target")(_plain_name)


class Container(_Strict):
    name: str
    room: str
    state: Lock = "closed"
    key: str | None = None

    _name = field_validator("name", "room", "key")(lambda v: v if v is None else _plain_name(v))


class Supporter(_Strict):
    name: str
    room: str

    _name = field_validator("name", "room")(_plain_name)


class Thing(_Strict):
    name: str
    kind: Literal["object", "key", "food"] = "object"
    place: str = Field(alias="in")
    """A room, a container, a supporter, or "inventory"."""

    _name = field_validator("name", "place")(_plain_name)


class Condition(_Strict):
    """One fact the goal needs; exactly one field is set."""

    holding: str | None = None
    inside: tuple[str, str] | None = Field(None, alias="in")
    on: tuple[str, str] | None = None
    at: str | None = None
    open: str | None = None
    closed: str | None = None
    locked: str | None = None
    eaten: str | None = None

    def fact(self) -> tuple[str, tuple[str, ...]]:
        """(kind, names) of the one condition set."""
        set_fields = [(k, v) for k, v in self.__dict__.items() if v is not None]
        if len(set_fields) != 1:
            raise ValueError(
                "a goal condition names exactly one of holding, in, on, at, open, closed, "
                "locked, eaten"
            )
        kind, value = set_fields[0]
        names = tuple(value) if isinstance(value, tuple) else (value,)
        return ("in" if kind == "inside" else kind), tuple(_plain_name(n) for n in names)


class GameSpec(_Strict):
    """A game: the player starts in `start`; the game is won when every goal condition holds."""

    name: str
    rooms: list[str] = Field(min_length=1)
    start: str
    links: list[Link] = []
    containers: list[Container] = []
    supporters: list[Supporter] = []
    objects: list[Thing] = []
    goal: list[Condition] = Field(min_length=1, max_length=MAX_GOAL)

    _name = field_validator("name", "start")(_plain_name)

    @field_validator("rooms")
    @classmethod
    def _rooms(cls, rooms: list[str]) -> list[str]:
        if len(rooms) > MAX_ROOMS:
            raise ValueError(f"{len(rooms)} rooms; a spec holds at most {MAX_ROOMS}")
        return [_plain_name(r) for r in rooms]

    def file_stem(self) -> str:
        return self.name.replace(" ", "-")


def parse_spec(raw: Any) -> GameSpec:
    """A checked spec, or a ConfigError with every reason it is refused."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a game spec is a JSON object, not {type(raw).__name__}")
    rooms = raw.get("rooms")
    if isinstance(rooms, list) and len(rooms) > MAX_ROOMS:  # refused before reading them
        raise ConfigError(f"{len(rooms)} rooms; a spec holds at most {MAX_ROOMS}")
    try:
        spec = GameSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg']}"
                for e in exc.errors()[:6]
            )
        ) from None
    problems = spec_problems(spec)
    if problems:
        raise ConfigError("; ".join(problems[:6]))
    return spec


def spec_problems(spec: GameSpec) -> list[str]:
    """What makes the spec unbuildable, in words (empty when it is sound)."""
    problems: list[str] = []
    rooms = set(spec.rooms)
    things: list[Container | Supporter | Thing] = [
        *spec.containers,
        *spec.supporters,
        *spec.objects,
    ]
    doors = [link.door for link in spec.links if link.door is not None]
    if len(things) + len(doors) > MAX_THINGS:
        problems.append(f"{len(things) + len(doors)} things; a spec holds at most {MAX_THINGS}")
        return problems
    names = [*spec.rooms, *(t.name for t in things), *(d.name for d in doors)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"names used twice: {', '.join(twice)}")
    problems += _overlapping([*(t.name for t in things), *(d.name for d in doors)])
    if spec.start not in rooms:
        problems.append(f"the start room {spec.start!r} is not one of the rooms")
    exits: set[tuple[str, str]] = set()
    for link in spec.links:
        for room in (link.source, link.target):
            if room not in rooms:
                problems.append(f"a link names {room!r}, which is not a room")
        if link.source == link.target:
            problems.append(f"a link leads from {link.source!r} to itself")
        for exit in ((link.source, link.direction), (link.target, OPPOSITE[link.direction])):
            if exit in exits:
                problems.append(f"{exit[0]!r} has two exits to the {exit[1]}")
            exits.add(exit)
    keys = {o.name for o in spec.objects if o.kind == "key"}
    locks: list[Door | Container] = [*doors, *spec.containers]
    for lock in locks:
        kind = "door" if isinstance(lock, Door) else "container"
        if lock.key is not None and lock.key not in keys:
            problems.append(
                f"the {kind} {lock.name!r} names key {lock.key!r}, which is not a key object"
            )
        if lock.state == "locked" and lock.key is None:
            problems.append(f"the {kind} {lock.name!r} is locked and no key opens it")
    furniture: list[Container | Supporter] = [*spec.containers, *spec.supporters]
    for where in furniture:
        if where.room not in rooms:
            problems.append(f"{where.name!r} is in {where.room!r}, which is not a room")
    places = rooms | {c.name for c in spec.containers} | {s.name for s in spec.supporters}
    for thing in spec.objects:
        if thing.place not in places | {"inventory"}:
            problems.append(
                f"{thing.name!r} is in {thing.place!r}, which is not a room, container or supporter"
            )
    problems += _unreachable(spec)
    problems += _goal_problems(spec)
    return problems


def _overlapping(names: list[str]) -> list[str]:
    """Things the game's parser cannot tell apart: every word of one is in the other's name
    ("gate" and "gate key": `unlock gate` would mean the key)."""
    words = {n: set(n.split()) for n in set(names)}
    return [
        f"the names {a!r} and {b!r} overlap (the game could not tell which is meant); rename one"
        for a in sorted(words)
        for b in sorted(words)
        if a != b and words[a] <= words[b]
    ]


def _unreachable(spec: GameSpec) -> list[str]:
    if spec.start not in spec.rooms:
        return []
    neighbours: dict[str, set[str]] = {r: set() for r in spec.rooms}
    for link in spec.links:
        if link.source in neighbours and link.target in neighbours:
            neighbours[link.source].add(link.target)
            neighbours[link.target].add(link.source)
    seen, queue = {spec.start}, deque([spec.start])
    while queue:
        for nxt in neighbours[queue.popleft()] - seen:
            seen.add(nxt)
            queue.append(nxt)
    return [f"room {r!r} cannot be reached from the start" for r in spec.rooms if r not in seen]


def _goal_problems(spec: GameSpec) -> list[str]:
    objects = {o.name: o for o in spec.objects}
    containers = {c.name for c in spec.containers}
    lockable = containers | {link.door.name for link in spec.links if link.door is not None}
    wanted: dict[str, list[Collection[str]]] = {
        "holding": [objects], "in": [objects, containers], "on": [objects, {s.name for s in spec.supporters}],
        "at": [set(spec.rooms)], "open": [lockable], "closed": [lockable], "locked": [lockable],
        "eaten": [{n for n, o in objects.items() if o.kind == "food"}],
    }  # fmt: skip
    problems = []
    for condition in spec.goal:
        try:
            kind, names = condition.fact()
        except ValueError as exc:
            problems.append(str(exc))
            continue
        for name, allowed in zip(names, wanted[kind], strict=True):
            if name not in allowed:
                problems.append(f"the goal '{kind}' names {name!r}, which is not a fitting thing")
    return problems


def read_specs(text: str) -> list[tuple[int, Any]]:
    """(line number, parsed JSON or the ConfigError of that line) for each non-empty line."""
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except ValueError as exc:
            rows.append((number, ConfigError(f"not valid JSON: {str(exc)[:200]}")))
    return rows
