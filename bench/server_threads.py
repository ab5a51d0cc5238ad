"""A torch-backed server beside another job: `toolgym serve search --simulator` with its
compute pool sized to its share of the host (the default, `--threads 0`) against the same
server with a thread per core (torch's own default, `--threads N`), each timed alone and
beside `--hogs` busy processes, in the same run.

Printed per setting: the median seconds of a top-`--topk` request over `--requests`, and the
ratio of the share-sized server's time to the all-cores server's (below 1: faster).

    python bench/server_threads.py [--model DIR] [--topk 100] [--requests 3] [--hogs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from common import tiny_model
from search_server import serve_search

from toolgym.cores import usable_cores

HOG = "while True: pass"


def timed(port: int, topk: int, requests: int) -> float:
    body = json.dumps({"queries": ["who founded the city by the river"], "topk": topk}).encode()
    times = []
    for _ in range(requests):
        request = urllib.request.Request(f"http://127.0.0.1:{port}/retrieve", body,
                                         {"content-type": "application/json"})  # fmt: skip
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="simulator model (default: fresh tiny)")
    parser.add_argument("--topk", type=int, default=100)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the server")
    args = parser.parse_args()
    model = tiny_model(args.model)
    cores = usable_cores()
    results: dict[tuple[str, str], float] = {}
    for label, threads in (("share", 0), ("all cores", cores)):
        server = serve_search(["--simulator", str(model), "--threads", str(threads)], 18131)
        try:
            timed(18131, args.topk, 1)  # warm
            results[label, "alone"] = timed(18131, args.topk, args.requests)
            hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
            try:
                time.sleep(2)
                results[label, "beside"] = timed(18131, args.topk, args.requests)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
        finally:
            server.terminate()
            server.wait(30)
    print(f"top-{args.topk} request, {cores} usable cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'':<26} {'share (s)':>10} {'all cores (s)':>14} {'ratio':>7}")
    for where in ("alone", f"beside {args.hogs} busy processes"):
        key = where.split()[0]
        share, every = results["share", key], results["all cores", key]
        print(f"{where:<26} {share:>10.2f} {every:>14.2f} {share / every:>7.2f}")


if __name__ == "__main__":
    main()
