"""How many threads a server's compute pools (torch's intra-op pool, faiss's OpenMP) use.

Left to themselves they take every core of the machine and spin while they wait, so beside
another job each thread fights for a core it does not get: the simulated search engine took
25 to 36 s for a top-100 request beside two busy processes on two cores, and 7 to 8 s with one
thread. A server takes its share of the host instead: the cores it may run on (its CPU
affinity and its cgroup's quota) less what other processes already keep busy, at least one.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cores() -> int:
    """The cores this process may run on: its affinity, capped by its cgroup's CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = CGROUP_CPU_MAX.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def host_share() -> int:
    """The threads worth running now: usable cores less the host's one-minute load (what
    others keep busy), at least one."""
    cores = usable_cores()
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, round(cores - busy)))


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def share_compute_threads() -> int:
    """Before torch is imported: its thread pools sized to this process's share of the host
    (the variables it reads at import), unless the user set them. Left to itself torch takes
    every core, and beside busy processes its threads spin: `toolgym model pretrain` beside
    two busy jobs on two cores spent 1.43 s of CPU a step, against 0.25 s with one thread."""
    count = host_share()
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(count))
    return int(os.environ["OMP_NUM_THREADS"])


def size_compute_pools(threads: int | None = None) -> int:
    """Set torch's (and faiss's, when loaded) thread pools to `threads`, or to this
    process's share of the host; the number set."""
    count = threads or host_share()
    import torch

    torch.set_num_threads(count)
    faiss = sys.modules.get("faiss")  # a dense index loaded it; nothing else needs it
    if faiss is not None:
        faiss.omp_set_num_threads(count)
    return count
