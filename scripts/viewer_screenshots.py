"""Screenshots of `toolgym view`'s pages for docs/rollouts.md, taken in headless Chromium
(the system's) from real runs: python scripts/viewer_screenshots.py RUN_DIR [RUN_DIR...]
(the first run's last kept step and its first trained episode are the ones shown), at
1280 pixels wide, and the runs and run pages at 800 too."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from toolgym.agents.trajectory import read_jsonl
from toolgym.envs.gui.browser import find_chromium
from toolgym.training.run.files import kept_steps

WIDTHS = (1280, 800)
NARROW = ("viewer-runs", "viewer-run")
"""The pages shot at the narrow width too (their charts wrap)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()
    step, kept = list(kept_steps(args.runs[0]).items())[-1]
    episodes = read_jsonl(kept)
    credited = [k for k, t in enumerate(episodes) if any(s.advantage for s in t.steps)]
    index = credited[0] if credited else 0  # a kept group may carry no signal at all
    pages = {
        "viewer-runs": ("/", ".chart"),
        "viewer-run": ("/run/0", "#steps a"),
        "viewer-step": (f"/run/0/step/{step}", "tr.episode-row"),
        "viewer-episode": (f"/run/0/step/{step}/episode/{index}", ".token"),
        "viewer-task": (f"/run/0/item/{episodes[index].item}", "#across"),
    }
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "toolgym", "view", *map(str, args.runs), "--no-open",
         "--port", str(port)]
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(), headless=True)
            for width in WIDTHS:  # a laptop's window, and a narrow one (its name says it)
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, (route, ready) in pages.items():
                    if width != WIDTHS[0] and name not in NARROW:
                        continue
                    page.goto(f"{url}/#{route}")
                    page.wait_for_selector(ready, timeout=20_000)
                    path = args.out / f"{name}{'' if width == WIDTHS[0] else f'-{width}'}.png"
                    page.screenshot(path=str(path))
                    print(path)
            browser.close()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
