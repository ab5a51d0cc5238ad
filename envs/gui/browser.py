"""BrowserPool: the system's Chromium, driven by Playwright's async API, shared by every
browser env of a process (an env resource: made once, closed with the runtime).

One browser process serves many episodes at once, each in a context (a cookie jar) of its
own, closed with the episode: every page it opened (popups too), everything its pages
stored and every script still running end with it, so nothing of one episode reaches the
next. Chromium starts offline and quiet: no
background traffic, no component updates, and every host but loopback sent to a proxy that
does not exist, so a page cannot reach the network even by IP address. Playwright never
downloads a browser: the executable is the system's (`executable`, $TOOLGYM_CHROMIUM, or
`chromium` on the PATH).

A browser that dies (crash, OOM kill) is noticed through Playwright's `disconnected` event;
the episodes on it fail as infrastructure errors (masked from training) and the next page
asked for starts a new browser. A context that will not close in time costs the browser the
same way: it is killed, and the next page starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError
from toolgym.log import get_logger

log = get_logger(__name__)

QUIET_FLAGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-gpu",
    "--disable-quic",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
)
OFFLINE_FLAGS = (
    # Chromium never proxies loopback, so local pages work; everything else goes to a
    # proxy on a closed port and fails at once.
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)
CLOSE_TIMEOUT_S = 10.0
"""How long closing an episode's context may take before the browser is killed instead."""
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium(executable: str | None = None) -> str:
    """The Chromium to run: `executable`, $TOOLGYM_CHROMIUM, or the first on the PATH."""
    chosen = executable or os.environ.get("TOOLGYM_CHROMIUM")
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise ConfigError(f"Chromium executable {chosen!r} does not exist or cannot run")
        return chosen
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError(
        "no Chromium found: install the system's (e.g. `apt-get install chromium`) or set "
        "$TOOLGYM_CHROMIUM to its path; toolgym never downloads a browser"
    )


def _playwright() -> Any:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        raise ConfigError(
            "browser envs need Playwright: pip install 'toolgym[gui]' (its Python package "
            "only; the browser is the system's Chromium)"
        ) from None
    return async_playwright


def playwright_error() -> type[Exception]:
    """Playwright's own error class (what a page, an element or a dead browser raises)."""
    from playwright.async_api import Error

    return Error


@dataclass
class Lease:
    """One episode's page, in a context of its own."""

    page: Any
    context: Any
    generation: int
    """Which browser launch the page belongs to (a later launch means this one died)."""


@dataclass
class BrowserPool:
    """A Chromium process that gives each episode a context of its own.

    Args:
        executable: the Chromium binary (see `find_chromium`).
        viewport: the pages' size in CSS pixels (width, height).
        offline: keep every host but loopback unreachable.
        launch_timeout_s: how long a launch may take before it counts as failed.
    """

    executable: str | None = None
    viewport: tuple[int, int] = (1280, 720)
    offline: bool = True
    launch_timeout_s: float = 30.0
    generation: int = 0
    """How many browsers this pool has launched (a restart adds one)."""
    _driver: Any = None
    _browser: Any = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _marker: str = field(default_factory=lambda: secrets.token_hex(6))

    @property
    def alive(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    async def lease(self) -> Lease:
        """A fresh page in a fresh context; starts (or restarts) the browser as needed."""
        async with self._lock:
            if not self.alive:
                await self._launch()
            browser, generation = self._browser, self.generation
        context = await browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            service_workers="block",
        )
        return Lease(await context.new_page(), context, generation)

    async def give_back(self, lease: Lease) -> None:
        """End an episode: close its context, with every page and script in it. One that
        will not close in time (its browser stuck past recovery) costs the browser."""
        if lease.generation != self.generation or not self.alive:
            return
        try:
            await asyncio.wait_for(lease.context.close(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "an episode's context did not close in %g s; killing the browser", CLOSE_TIMEOUT_S
            )
            await self.kill(lease.generation)
        except Exception as exc:  # the browser died meanwhile: nothing to close
            log.debug("closing a context: %s", exc)

    async def kill(self, generation: int) -> None:
        """Kill launch `generation` of the browser (if it still runs); the next lease starts
        a new one."""
        async with self._lock:
            if generation != self.generation or self._browser is None:
                return
            pid = self.browser_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await self._stop_browser()

    def lease_alive(self, lease: Lease) -> bool:
        """Whether `lease`'s page can still be used (its browser lives, the page is open)."""
        return lease.generation == self.generation and self.alive and not lease.page.is_closed()

    def browser_pid(self) -> int | None:
        """The browser process's id while it runs (Linux): the process whose command line
        carries this pool's marker switch and is no child (no `--type=`)."""
        marker = f"--toolgym-pool={self._marker}".encode()
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in argv and not any(a.startswith(b"--type=") for a in argv):
                return int(entry.name)
        return None

    async def _launch(self) -> None:
        if self._browser is not None:
            log.warning("the browser died; starting a new one (launch %d)", self.generation + 1)
            await self._stop_browser()
        if self._driver is None:
            self._driver = await _playwright()().start()
        args = [*QUIET_FLAGS, *(OFFLINE_FLAGS if self.offline else ()),
                f"--toolgym-pool={self._marker}"]  # fmt: skip
        self._browser = await self._driver.chromium.launch(
            executable_path=find_chromium(self.executable),
            args=args,
            headless=True,
            timeout=self.launch_timeout_s * 1000,
        )
        self.generation += 1

    async def _stop_browser(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            try:
                await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT_S)
            except Exception as exc:
                log.debug("closing a dead browser: %s", exc)

    async def aclose(self) -> None:
        await self._stop_browser()
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.stop()
