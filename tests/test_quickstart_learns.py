"""The README's main job as CI runs it: a tiny model's SFT policy must get measurably better
under GiGPO on the same held-out mazes (fixed seeds).

Runs are not bit-reproducible (batched decoding pads rows differently from run to run, which
can flip a sample and then the run), so the margins are well under what two runs of 40 steps
measured. Sampled at temperature 1 (the policy RL trains): success +0.11 and +0.09, valid
calls +0.44 and +0.45, mean reward +0.60 and +0.59. Greedy: valid calls +0.47 both times and
mean reward +0.57 and +0.42, but success +0.15 in one run and -0.01 in the other, so greedy
success is reported, not asserted.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(1500)


def test_quickstart_improves_on_its_sft_start(cli, tmp_path):
    result = cli("quickstart", "--out", str(tmp_path), timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SFT + GiGPO" in result.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    for temperature in ("1.0", "0.0"):
        before, after = results["before_rl"][temperature], results["after_rl"][temperature]
        assert after["eval/valid_actions"] >= before["eval/valid_actions"] + 0.2, (before, after)
        assert after["eval/reward"] >= before["eval/reward"] + 0.25, (before, after)
    sampled_before, sampled_after = results["before_rl"]["1.0"], results["after_rl"]["1.0"]
    assert sampled_after["eval/success"] >= sampled_before["eval/success"] + 0.02
    assert (tmp_path / "curves.png").stat().st_size > 5000
    assert (tmp_path / "rl" / "policy" / "config.json").is_file()
