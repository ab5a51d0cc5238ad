"""Latency of a short sandboxed Python call through the warm pool, next to what it replaces.

- bwrap cold:   a plain `bwrap ... python3 -c CODE` per call (the same namespaces and binds
                as the pool's sandboxes, one interpreter start each)
- docker exec:  `docker exec` of `python3 -c CODE` in one running container of the same image
- pool:         SandboxPool.run(CODE) on warm sandboxes (a fork per call), bubblewrap and
                docker

Each path runs `--calls` sequential calls (p50 and p99 in ms); then the pool's throughput
with `--concurrency` calls in flight. The targets: p50 under 5 ms and p99 under 20 ms through
the warm pool. All in the same run, because these machines are shared and noisy.

    python bench/sandbox_pool.py [--calls 300] [--concurrency 2] [--backends bubblewrap,docker]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
from collections.abc import Callable

from toolgym.sandbox import Limits, SandboxPool
from toolgym.sandbox.backends.bubblewrap import BubblewrapBackend
from toolgym.sandbox.backends.docker import DEFAULT_IMAGE

CODE = "print(sum(range(100)))"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def timed(call: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def bwrap_cold(n: int) -> list[float]:
    backend = BubblewrapBackend()
    argv = [*backend.argv(Limits(), "probe"), backend.python, "-I", "-c", CODE]
    user = backend._as_user()
    return timed(lambda: subprocess.run(argv, capture_output=True, check=True, **user), n)


def docker_exec(n: int) -> list[float]:
    name = subprocess.run(
        ["docker", "run", "-d", "--rm", "--network", "none", DEFAULT_IMAGE, "sleep", "600"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        argv = ["docker", "exec", name, "python3", "-I", "-c", CODE]
        return timed(lambda: subprocess.run(argv, capture_output=True, check=True), n)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


async def pool_paths(backend: str, n: int, concurrency: int) -> tuple[list[float], float]:
    async with SandboxPool(backend, size=concurrency, health_interval_s=0) as pool:
        for _ in range(20):  # warm up
            await pool.run(CODE)
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            result = await pool.run(CODE)
            samples.append(time.perf_counter() - start)
            assert result.stdout == "4950\n", result
        start = time.perf_counter()
        results = await asyncio.gather(*(pool.run(CODE) for _ in range(n)))
        rate = n / (time.perf_counter() - start)
        assert all(r.stdout == "4950\n" for r in results)
        return samples, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--backends", default="bubblewrap,docker")
    args = parser.parse_args()
    backends = args.backends.split(",")
    rows = []
    baselines = {"bubblewrap": ("bwrap cold", bwrap_cold), "docker": ("docker exec", docker_exec)}
    for backend in backends:
        label, baseline = baselines[backend]
        base_p50, base_p99 = percentiles(baseline(max(args.calls // 3, 30)))
        samples, rate = asyncio.run(pool_paths(backend, args.calls, args.concurrency))
        p50, p99 = percentiles(samples)
        rows.append((label, base_p50, base_p99, None, None))
        rows.append((f"pool ({backend})", p50, p99, rate, base_p50 / p50))
    print(f"short python call ({CODE!r}), {args.calls} calls; throughput with "
          f"{args.concurrency} in flight")  # fmt: skip
    print(f"{'path':<20} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>9} {'p50 speed-up':>13}")
    for label, p50, p99, rate, speedup in rows:
        rate_text = f"{rate:9.0f}" if rate else f"{'':>9}"
        speed_text = f"{speedup:12.1f}x" if speedup else f"{'':>13}"
        print(f"{label:<20} {p50:8.2f} {p99:8.2f} {rate_text} {speed_text}")
    pools = [r for r in rows if r[3] is not None]
    verdict = all(p50 < 5 and p99 < 20 for _, p50, p99, _, _ in pools)
    print(
        f"target p50 < 5 ms and p99 < 20 ms through the warm pool: {'met' if verdict else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
