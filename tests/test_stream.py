"""The group stream's rules on their own, with groups that take random times to play:
admission keeps started-and-untrained groups within (eta + 1) x G, every batch holds the
groups that started eta versions ago, and nothing is trained twice or lost."""

from __future__ import annotations

import asyncio
import random

import pytest

from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.training.stream import GroupStream

G = 4


class Numbered:
    """A builder whose groups are plain requests: step k's slot j is group k*G + j."""

    def requests(self, step, groups):
        return [step * G + j for j in range(groups)]

    async def build(self, ctx):  # unused: a PlaysRequests builder streams group by group
        raise AssertionError

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


@pytest.mark.parametrize("eta", [0, 1, 2])
def test_admission_and_staleness_hold_for_every_group(eta):
    rng = random.Random(eta)

    async def scenario():
        gate = PolicyGate()
        started: list[tuple[int, int]] = []  # (group, version when it started)

        def collect_for(step):
            async def collect(requests):
                (number,) = requests
                started.append((number, gate.version))
                # admission: accepted + running <= (eta + version + 1) x G at every start
                assert len(started) <= (eta + gate.version + 1) * G
                await asyncio.sleep(rng.choice([0.001, 0.002, 0.02]))  # a long tail
                return [TrajectoryGroup(f"g{number}", None, [Trajectory(f"g{number}:0")])]

            return collect

        stream = GroupStream(Numbered(), collect_for, gate, G, eta)
        stream.start()
        trained: list[str] = []
        for version in range(6):
            batch = await stream.take(version)
            for unit in batch.units:
                assert version - unit.version <= eta  # never staler than eta
            trained += [g.group_id for g in batch.groups]
            assert len(batch.groups) == G
            await asyncio.sleep(0.005)  # the update
            await gate.swap(_nothing)
            stream.synced()
        await stream.aclose()
        return trained, stream.state_dict()

    trained, state = asyncio.run(scenario())
    assert len(trained) == len(set(trained)) == 6 * G
    numbers = {int(g[1:]) for g in trained} | set(state["untrained"])
    assert numbers == set(range(state["next_unit"]))  # every started group: trained or kept


async def _nothing():
    return None


@pytest.mark.parametrize(
    "state",
    [["x"], {"next_unit": "3"}, {"next_unit": 2, "untrained": [5]}, {"untrained": [-1]},
     {"next_unit": 4, "untrained": "0,1"}],
)  # fmt: skip
def test_a_corrupted_stream_state_is_refused(state):
    from toolgym.training.stream import read_stream_state

    with pytest.raises(ValueError, match="stream's"):
        read_stream_state(state)
    assert read_stream_state({"next_unit": 4, "untrained": [1, 3]}) == (4, [1, 3])
