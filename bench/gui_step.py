"""Browser env steps with 8 pages at once: toolgym's MiniWoB++ env next to raw Playwright
doing the same work on the same pages, in the same run.

A step is what an agent's turn costs on the page: click a checkbox of click-checkboxes (a
click that never ends the task), read the task's verdict, and read the page outline. The
paths do that on the same system Chromium (same flags, one browser each, one context and
page per episode):

- raw:     the same Playwright calls the env makes, made directly: find the element, one
           `evaluate` for the point to click (scrolled into view, not covered), a mouse
           click there, one `evaluate` for the verdict and one for the outline
- toolgym: `env.astep(<tool_call>click</tool_call>)`: parse the call, validate it, find the
           element by its outline id, click, read the verdict, read the outline, build the
           observation messages, hash the state key
- playwright-click: raw, with Playwright's own `click()` instead (it also waits until the
           element has kept its place for two animation frames): what that wait would cost

Printed: step latency p50 / p99 and steps per second for each path, and the toolkit's
overhead (toolgym p50 / raw p50 - 1). Targets: p50 under 50 ms, overhead under 20%. Paths
alternate over `--rounds` so the machine's noise falls on both alike.

    python bench/gui_step.py [--pages 8] [--steps 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from toolgym.envs.gui.browser import BrowserPool
from toolgym.envs.gui.browser_env import POINT_JS
from toolgym.envs.gui.miniwob import START_JS, MiniWoBEnv
from toolgym.envs.gui.page_tree import read_tree
from toolgym.envs.resources import Resources

TASK = "click-checkboxes"
PATHS = ("raw", "toolgym", "playwright-click")
LIMIT_S = 3600.0  # the task's own 10 s would end long runs; the steps are the same


def click_call(element: int) -> str:
    return (
        f"<tool_call>{json.dumps({'name': 'click', 'arguments': {'element': element}})}</tool_call>"
    )


async def toolgym_page(resources: Resources, seed: int, steps: int) -> list[float]:
    env = MiniWoBEnv(task=TASK, time_limit_s=LIMIT_S, max_turns=steps + 1)
    env.use_resources(resources)
    await env.areset(seed=seed)
    assert env.tree is not None
    boxes = [n["id"] for n in env.tree.nodes if n["role"] == "checkbox"]
    latencies = []
    for step in range(steps):
        start = time.perf_counter()
        _, _, terminated, _, info = await env.astep(click_call(boxes[step % len(boxes)]))
        latencies.append(time.perf_counter() - start)
        assert info["valid_action"] and not terminated, info
    await env.aclose()
    return latencies


async def raw_page(pool: BrowserPool, seed: int, steps: int, own_click: bool) -> list[float]:
    lease = await pool.lease()
    page = lease.page
    await page.goto(MiniWoBEnv(task=TASK).url, wait_until="load")
    await page.evaluate(START_JS, [str(seed), LIMIT_S * 1000])
    count = await page.locator("input[type=checkbox]").count()
    latencies = []
    for step in range(steps):
        start = time.perf_counter()
        box = await page.query_selector(f"input[type=checkbox] >> nth={step % count}")
        assert box is not None
        if own_click:
            await box.click()
        else:
            point = await box.evaluate(POINT_JS)
            await page.mouse.click(point["x"], point["y"])
        done = await page.evaluate("[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_GLOBAL]")
        await read_tree(page, MiniWoBEnv.ignore, 300)
        latencies.append(time.perf_counter() - start)
        assert not done[0]
    await pool.give_back(lease)
    return latencies


async def run(path: str, pages: int, steps: int) -> tuple[list[float], float]:
    """All the path's pages at once; (every step's latency, steps per second)."""
    resources, pool = Resources(), BrowserPool(viewport=(160, 210))
    try:

        def one(seed: int, n: int) -> Any:
            if path == "toolgym":
                return toolgym_page(resources, seed, n)
            return raw_page(pool, seed, n, own_click=path == "playwright-click")

        await one(0, 1)  # start the browser
        start = time.perf_counter()
        runs = [one(seed, steps) for seed in range(pages)]
        latencies = [x for page in await asyncio.gather(*runs) for x in page]
        return latencies, len(latencies) / (time.perf_counter() - start)
    finally:
        await resources.aclose()
        await pool.aclose()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    latencies: dict[str, list[float]] = {path: [] for path in PATHS}
    rates: dict[str, list[float]] = {path: [] for path in PATHS}
    for _ in range(args.rounds):
        for path in PATHS:
            steps, rate = asyncio.run(run(path, args.pages, args.steps))
            latencies[path] += steps
            rates[path].append(rate)
    print(f"{TASK}, {args.pages} pages at once, {args.steps} steps each, {args.rounds} rounds:")
    for path in PATHS:
        p50, p99 = percentile(latencies[path], 0.5), percentile(latencies[path], 0.99)
        print(f"  {path:16} p50 {p50 * 1000:6.1f} ms   p99 {p99 * 1000:6.1f} ms   "
              f"{statistics.median(rates[path]):6.1f} steps/s")  # fmt: skip
    overhead = percentile(latencies["toolgym"], 0.5) / percentile(latencies["raw"], 0.5) - 1
    rate_ratio = statistics.median(rates["toolgym"]) / statistics.median(rates["raw"])
    print(f"toolkit overhead at p50: {overhead:+.0%}; steps/s toolgym / raw: {rate_ratio:.2f}x")


if __name__ == "__main__":
    main()
