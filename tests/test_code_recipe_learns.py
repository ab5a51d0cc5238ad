"""The code recipe as a user runs it (configs/code_gigpo.yaml's header), with half its SFT
episodes (2000) and shortened to 10 GiGPO steps: GiGPO must lift sampled success on held-out
problems well above the SFT start.

The base is conftest's `recipe_base` (MathCode's and SQL-v0's transcripts mixed in), shared
with the SQL recipe's test. Pretraining and SFT are deterministic on a given machine; GiGPO
need not be bit-reproducible (batched decoding can pad rows differently from run to run), so
the margin sits under the least that was measured. On the first 128 held-out problems at
temperature 1, after 10 GiGPO steps from the SFT (2000 episodes) of seeds 0 to 4: 50.8% ->
94.5%, 55.5% -> 96.9%, 58.6% -> 96.1%, 47.7% -> 95.3%, 41.4% -> 94.5% (+43.7, +41.4, +37.5,
+47.7, +53.1 points; seed 4's SFT did not learn to copy, held-out NLL 0.208). From the recipe's
4000 episodes: +41.4, +39.9 and +38.3. Asserted: +25 points (128 episodes give a standard error of
about 4 points).

About one SFT run in five does not learn to copy (its held-out NLL stays near 0.2); docs/code.md
tells users to run SFT again with another seed then, and so does this test.
"""

from __future__ import annotations

import re

import pytest

from conftest import eval_success, run_ok

pytestmark = pytest.mark.timeout(1500)

MARGIN = 0.25
COPIES = 0.16
"""Held-out NLL per token under which the SFT student copies the problem's numbers (about
0.13 when it does, 0.18 and above when it does not)."""


def held_out_nll(printed: str) -> float:
    match = re.search(r"held-out demonstration NLL per token: [\d.]+ -> ([\d.]+)", printed)
    assert match, printed[-2000:]
    return float(match.group(1))


def test_gigpo_lifts_the_code_recipe_over_its_sft_start(recipe_base, tmp_path):
    base, sft, rl = recipe_base, tmp_path / "sft", tmp_path / "rl"
    for seed in ("0", "1"):  # docs/code.md's remedy: SFT that did not learn to copy runs again
        printed = run_ok("sft", "toolgym/MathCode-v0", "--model", str(base), "--out", str(sft),
                      "--episodes", "2000", "--epochs", "5", "--lr", "3e-3", "--no-tool-schemas",
                      "--env-arg", "solver_slips=0.5", "--seed", seed)  # fmt: skip
        if held_out_nll(printed) < COPIES:
            break
    run_ok("train", "--config", "configs/code_gigpo.yaml", f"model={sft}", f"run_dir={rl}",
        "steps=10", "eval.at_start=true")  # fmt: skip
    evals = eval_success(rl)
    before, after = evals[-1], evals[9]
    assert after >= before + MARGIN, (before, after)
