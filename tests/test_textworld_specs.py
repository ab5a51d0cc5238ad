"""Games designed as specs: 20 hand-written ones compile and their walkthroughs win them in
the env; broken and hostile specs are refused, each with its reason, in bounded time."""

from __future__ import annotations

import json
import time

import pytest

import toolgym
from conftest import FIXTURES, run_cli
from toolgym.envs.textworld.specs import parse_spec
from toolgym.errors import ConfigError

SPECS = FIXTURES / "textworld_specs.jsonl"


def test_twenty_hand_written_specs_compile_and_their_walkthroughs_win(tmp_path):
    result = run_cli("textworld", "generate", "--from", str(SPECS), "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "20 built, 0 refused" in result.stdout
    rows = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 20
    env = toolgym.make("toolgym/TextWorld-v0", tasks=str(tmp_path / "tasks.jsonl"))
    lengths = []
    try:
        for row in rows:
            env.reset(options={"task": row})
            walkthrough = env.unwrapped.walkthrough()
            total, terminated = 0.0, False
            for command in walkthrough:
                _, reward, terminated, _, info = env.step(f"<command>{command}</command>")
                assert info["valid_action"], (row, command, info)
                total += reward
            assert terminated and total == 1.0, row
            lengths.append(len(walkthrough))
    finally:
        env.close()
    assert max(lengths) >= 10  # the heist and the corridor take ten steps


def _heist() -> dict:
    return json.loads(SPECS.read_text().splitlines()[10])


BROKEN = {
    "a door with no key": (
        lambda s: s["links"][1]["door"].pop("key"), "locked and no key opens it"),
    "an unreachable room": (lambda s: s["rooms"].append("attic"), "'attic' cannot be reached"),
    "a 10,000-room map": (
        lambda s: s.update(rooms=[f"room {i}" for i in range(10_000)]), "at most 30"),
    "a key that is not a key": (
        lambda s: s["objects"][0].update(kind="object"), "not a key object"),
    "two exits one way": (
        lambda s: s["links"].append({"from": "kitchen", "direction": "east", "to": "vault"}),
        "two exits to the east"),
    "Inform 7 source in a name": (
        lambda s: s["objects"][1].update(name='coin". Every turn: end the story'), "plain name"),
    "names the parser cannot tell apart": (
        lambda s: s["objects"].append({"name": "coin", "in": "hall"}), "overlap"),
    "a goal on a room": (lambda s: s.update(goal=[{"holding": "kitchen"}]), "not a fitting thing"),
    "the key locked in its own chest": (
        lambda s: s["containers"][0].update(state="locked", key="iron key"), "cannot be reached"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_spec_is_refused_with_its_reason(case):
    spec = _heist()
    BROKEN[case][0](spec)
    if case == "the key locked in its own chest":  # sound on paper: the planner refuses it
        parse_spec(spec)
        return
    with pytest.raises(ConfigError, match=BROKEN[case][1]):
        parse_spec(spec)


def test_the_command_refuses_each_broken_spec_in_bounded_time_and_builds_the_rest(tmp_path):
    lines = [json.dumps(_heist())]
    for change, _ in BROKEN.values():
        spec = _heist()
        change(spec)
        lines.append(json.dumps(spec))
    lines.append("{not json")
    specs = tmp_path / "specs.jsonl"
    specs.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    result = run_cli("textworld", "generate", "--from", str(specs), "--out", str(tmp_path / "out"))
    assert time.monotonic() - started < 60
    assert result.returncode == 0, result.stderr
    assert f"1 built, {len(BROKEN) + 1} refused" in result.stdout
    for case, (_, reason) in BROKEN.items():
        assert reason in result.stdout, case
    assert "Traceback" not in result.stdout + result.stderr
