"""Small game specs drawn from a seed: what the scripted proposer writes (its demonstrations
teach the spec format) and what seeds a self-play pool. Each is sound by construction: a
path of two to four rooms on a grid (so no two exits of a room point the same way), at most
one door on it (closed, or locked with its key in a room before it), one or two objects, a
chest or a table, and a goal of one condition that does not hold at the start."""

from __future__ import annotations

import itertools
import random
from typing import Any

ROOMS = ("kitchen", "hall", "cellar", "attic", "garden", "study", "pantry", "porch", "library")
OBJECTS = ("coin", "lamp", "book", "ring", "map", "cup", "candle", "scroll")
FOODS = ("apple", "bread", "carrot")
STEP = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}


def random_spec(seed: int) -> dict[str, Any]:
    """A spec (the JSON a model would write) of a small winnable game."""
    rng = random.Random(seed)
    rooms = rng.sample(ROOMS, rng.randint(2, 4))
    links = _path(rng, rooms)
    spec: dict[str, Any] = {"name": f"game {seed % 10_000}", "rooms": rooms, "start": rooms[0]}
    things = [{"name": name, "in": rng.choice(rooms)} for name in rng.sample(OBJECTS, 2)]
    if rng.random() < 0.4:
        things[1] = {"name": rng.choice(FOODS), "kind": "food", "in": rng.choice(rooms)}
    if rng.random() < 0.4 and len(rooms) > 1:
        door = rng.randrange(len(links))
        if rng.random() < 0.5:
            links[door]["door"] = {"name": "oak door", "state": "closed"}
        else:
            links[door]["door"] = {"name": "oak door", "state": "locked", "key": "brass key"}
            things.append({"name": "brass key", "kind": "key", "in": rng.choice(rooms[: door + 1])})
    spec["links"] = links
    furniture = rng.choice(("chest", "table"))
    place = rng.choice(rooms)
    if furniture == "chest":
        spec["containers"] = [{"name": "chest", "room": place, "state": "closed"}]
        things[0]["in"] = "chest"
    else:
        spec["supporters"] = [{"name": "table", "room": place}]
    spec["objects"] = things
    spec["goal"] = [_goal(rng, spec, things)]
    return spec


def _path(rng: random.Random, rooms: list[str]) -> list[dict[str, Any]]:
    """Links from each room to the next, each a step to a grid cell not yet used."""
    cells, links, at = {(0, 0)}, [], (0, 0)
    for source, target in itertools.pairwise(rooms):
        free = [d for d, (dx, dy) in STEP.items() if (at[0] + dx, at[1] + dy) not in cells]
        direction = rng.choice(free)  # a path of at most four cells always has a free side
        at = (at[0] + STEP[direction][0], at[1] + STEP[direction][1])
        cells.add(at)
        links.append({"from": source, "direction": direction, "to": target})
    return links


def _goal(rng: random.Random, spec: dict[str, Any], things: list[dict[str, Any]]) -> dict:
    """One condition the start does not meet."""
    thing = things[0]["name"]
    choices: list[dict[str, Any]] = [{"holding": thing}]
    if spec.get("supporters"):
        choices.append({"on": [thing, "table"]})
    if things[1].get("kind") == "food":
        choices.append({"eaten": things[1]["name"]})
    choices.append({"at": rng.choice(spec["rooms"][1:])})  # any room but the start
    return rng.choice(choices)
