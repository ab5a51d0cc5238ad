"""How fast `toolgym view` opens a large step: a kept-rollouts file of N episodes (copies of
a real one, each its own), served by the viewer's own app on loopback. It prints the time
to open the step (the first page: the file read and parsed), to turn a page, to filter by
text, and to open one episode, each against reading the file with `read_jsonl` in the same
run, the floor any reader pays.

    python bench/viewer_step.py RUN_DIR [--episodes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from toolgym.agents.trajectory import read_jsonl
from toolgym.training.run.files import kept_steps, rollouts_path
from toolgym.viewer.runs import open_runs
from toolgym.viewer.server import build_app


def big_copy(run: Path, episodes: int) -> tuple[Path, int]:
    """A copy of `run` whose last kept step holds `episodes` episodes."""
    out = Path(tempfile.mkdtemp(prefix="toolgym-viewer-bench-")) / run.name
    shutil.copytree(run, out)
    step, path = list(kept_steps(out).items())[-1]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    with path.open("w") as f:
        for k in range(episodes):
            episode = dict(lines[k % len(lines)], id=f"copy:{k}")
            f.write(json.dumps(episode) + "\n")
    return out, step


async def timed(client: TestClient, url: str) -> float:
    start = time.perf_counter()
    answer = await client.get(url)
    assert answer.status == 200, await answer.text()
    await answer.read()
    return time.perf_counter() - start


async def measure(run: Path, step: int, episodes: int, repeats: int) -> dict[str, list[float]]:
    path = rollouts_path(run, step)
    times: dict[str, list[float]] = {
        k: [] for k in ("read_jsonl", "open", "page", "text", "episode")
    }
    for _ in range(repeats):
        start = time.perf_counter()
        read_jsonl(path)
        times["read_jsonl"].append(time.perf_counter() - start)
        app = build_app(open_runs([run]), "127.0.0.1")  # a fresh app: nothing parsed yet
        async with TestClient(TestServer(app)) as client:
            base = f"/api/runs/0/steps/{step}"
            times["open"].append(await timed(client, base))
            times["page"].append(await timed(client, base + "?offset=500"))
            times["text"].append(await timed(client, base + "?q=north"))
            times["episode"].append(await timed(client, f"{base}/episodes/{episodes * 2 // 3}"))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path)
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    run, step = big_copy(args.run, args.episodes)
    size = rollouts_path(run, step).stat().st_size / 1e6
    times = asyncio.run(measure(run, step, args.episodes, args.repeats))
    floor = statistics.median(times["read_jsonl"])
    print(f"a step of {args.episodes} episodes ({size:.1f} MB), median of {args.repeats}:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<10} {median * 1000:8.1f} ms   {median / floor:5.2f}x read_jsonl")


if __name__ == "__main__":
    main()
