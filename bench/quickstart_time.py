"""Wall clock of `toolgym quickstart`: this tree against an earlier commit, in the same run.

Both versions are installed the same way (`pip install --no-deps --target`, from this tree and
from `git archive REF`) and run as fresh processes, one after the other, alternating which
goes first each round, so a noisy neighbour hits both alike. Prints each run's seconds, its RL
env steps and its sampled success after RL, the medians, and the ratios this tree / REF of
the seconds and of the seconds per env step (the RL stage is not bit-reproducible, so a run
whose policy takes more turns does more work; the runtime's target: at most 1.10).

    python bench/quickstart_time.py --base REF [--rounds 1] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def install(source: Path, target: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True,
    )  # fmt: skip


def checkout(ref: str, where: Path) -> Path:
    where.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def quickstart(site: Path, out: Path, steps: int) -> tuple[float, int, float]:
    """Seconds, RL env steps, and sampled success after RL."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "toolgym", "quickstart", "--out", str(out), "--steps", str(steps)],
        check=True, env=env, cwd=out.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    results = json.loads((out / "results.json").read_text())
    after = results["after_rl"]["1.0"]  # an earlier tree's table had its eval split alone
    success = after["held-out/success"] if "held-out/success" in after else after["eval/success"]
    return seconds, sum(m["env_steps"] for m in metrics), success


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git ref to compare against")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40, help="RL steps (the quickstart's 40)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolgym-qs-bench-") as tmp:
        root = Path(tmp)
        sites = {"this tree": root / "new", f"base {args.base}": root / "old"}
        install(ROOT, sites["this tree"])
        install(checkout(args.base, root / "src-old"), sites[f"base {args.base}"])
        times: dict[str, list[float]] = {name: [] for name in sites}
        per_step: dict[str, list[float]] = {name: [] for name in sites}
        for r in range(args.rounds):
            order = list(sites) if r % 2 == 0 else list(reversed(sites))
            for name in order:
                out = root / f"run-{r}-{name[:4]}"
                seconds, env_steps, success = quickstart(sites[name], out, args.steps)
                times[name].append(seconds)
                per_step[name].append(seconds / env_steps)
                print(f"round {r}: {name}: {seconds:.1f} s, {env_steps} RL env steps, "
                      f"sampled success after RL {success:.1%}", flush=True)  # fmt: skip
    base = f"base {args.base}"
    for name in sites:
        print(
            f"{name:24} median {statistics.median(times[name]):7.1f} s, {len(times[name])} run(s)"
        )
    seconds = statistics.median(times["this tree"]) / statistics.median(times[base])
    ratio = statistics.median(per_step["this tree"]) / statistics.median(per_step[base])
    print(
        f"this tree / base: seconds {seconds:.3f}x, seconds per RL env step {ratio:.3f}x (target <= 1.10)"
    )


if __name__ == "__main__":
    main()
