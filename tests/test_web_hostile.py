"""Hostile pages against the browser envs, on real Chromium over loopback: scripts that never
yield (at load, on a click, in the task's own check), popups that try to outlive their
episode, text that is not valid Unicode, and checks that answer NaN. Every case ends in
bounded time with nothing carried into the next episode."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from conftest import static_site
from toolgym.envs.gui.web import WebEnv
from toolgym.tools.tool import InfraError

PAGES = {
    # spins after 3 s: later than any reset can take (its page steps have a 2 s limit), so
    # the reset reads the page and the click finds it stuck, however loaded the machine is
    "spin_later.html": "<button>Go</button><script>setTimeout(() => { for (;;) {} }, 3000)</script>",
    "spin_on_click.html": "<button onclick='for (;;) {}'>Go</button>",
    "spin_at_load.html": "<p>loading</p><script>for (;;) {}</script>",
    "calm.html": "<button onclick='window.done = true'>Go</button>",
    "popper.html": (
        "<button>Go</button><script>if (location.hash !== '#popup') window.open('popper.html#popup');"
        " else setTimeout(() => localStorage.setItem('won', '1'), 1000);</script>"
    ),
    "surrogates.html": (
        "<button id=b>x</button><p id=p></p><script>const s = String.fromCharCode(0xD800);"
        " document.getElementById('b').textContent = 'pay ' + s;"
        " document.getElementById('p').textContent = 'lone ' + s + ' surrogate';"
        " document.title = s;</script>"
    ),
}
LIMITS = {"page_timeout_s": 2.0, "action_timeout_s": 1.0}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-site")
    for name, html in PAGES.items():
        (folder / name).write_text(f"<!doctype html><html><body>{html}</body></html>")
    yield from static_site(folder, "calm.html")


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def task(page: str, check_js: str = "window.done ? 1 : null") -> dict[str, str]:
    return {"url": page, "instruction": "press Go", "check_js": check_js}


def env_for(site, page, check_js="window.done ? 1 : null", **kwargs) -> WebEnv:
    return WebEnv(tasks=[task(page, check_js)], base_url=site, **{**LIMITS, **kwargs})


def button(env: WebEnv) -> int:
    return next(n["id"] for n in env.tree.nodes if n["role"] == "button")


def chromium_busy_ticks(seconds: float = 1.0) -> int:
    """The most CPU ticks any of this process's Chromium descendants used over `seconds`
    (100 a second is a core); others' browsers (a parallel test's) are not counted."""

    def ticks() -> dict[str, int]:
        stats: dict[str, list[str]] = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")
                if b"chrom" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    stats[pid] = stat[2].split()
                else:
                    stats[pid] = stat[2].split()[:2]  # only the parent is needed
            except OSError:
                continue
        mine, grew = {str(os.getpid())}, True
        while grew:
            found = {pid for pid, fields in stats.items() if fields[1] in mine} - mine
            mine |= found
            grew = bool(found)
        return {
            pid: int(fields[11]) + int(fields[12])
            for pid, fields in stats.items()
            if pid in mine and len(fields) > 12
        }

    before = ticks()
    time.sleep(seconds)
    after = ticks()
    return max([after[p] - before.get(p, 0) for p in after] or [0])


def test_scripts_that_never_yield_are_stopped_and_the_env_goes_on(site):
    env = env_for(site, "calm.html")
    try:
        for page in ("spin_later.html", "spin_on_click.html"):
            env.reset(options={"task": task(page)})
            if page == "spin_later.html":
                time.sleep(3.5)  # its loop has begun
            started = time.monotonic()
            obs, reward, terminated, truncated, info = env.step(call("click", element=button(env)))
            took = time.monotonic() - started
            assert info["infra_error"] and "did not answer" in info["infra_error"], (page, info)
            assert reward == 0 and took < 2 * LIMITS["page_timeout_s"] + 1, (page, took)
            assert chromium_busy_ticks() < 50, page  # the stuck renderer was stopped
        started = time.monotonic()
        with pytest.raises(InfraError, match="did not answer"):
            env.reset(options={"task": task("spin_at_load.html")})
        # stopped at its time limit, not hung (the bound leaves room for a loaded machine)
        assert time.monotonic() - started < 2 * LIMITS["page_timeout_s"] + 1
        assert chromium_busy_ticks() < 50
        env.reset(options={"task": task("calm.html")})  # the same env still works
        _, reward, terminated, _, _ = env.step(call("click", element=button(env)))
        assert (reward, terminated) == (1.0, True)
    finally:
        started = time.monotonic()
        env.close()
        assert time.monotonic() - started < 5


def test_a_check_that_never_yields_is_stopped(site):
    env = env_for(site, "calm.html", check_js="(() => { for (;;) {} })()")
    try:
        env.reset(seed=0)
        started = time.monotonic()
        _, reward, _, _, info = env.step(call("click", element=button(env)))
        assert info["infra_error"] and time.monotonic() - started < 2 * LIMITS["page_timeout_s"] + 1
        assert reward == 0
    finally:
        env.close()


def wait_for_popup(env, seconds: float = 10.0) -> None:
    """Until the episode's page has opened its popup (later than 0.3 s on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while len(env.lease.context.pages) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(env.lease.context.pages) == 2  # the popup opened


def test_popups_close_with_their_episode(site):
    """The popup of one episode would store a win after a second; the next episode, on the
    same env and browser, must start without it and without the popup."""
    env = env_for(site, "popper.html", check_js="localStorage.getItem('won') ? 1 : null")
    try:
        env.reset(seed=0)
        wait_for_popup(env)
        env.reset(seed=0)
        wait_for_popup(env)  # this episode's own popup opens
        first_contexts = env.lease.context.browser.contexts
        time.sleep(1.2)  # the first popup would have stored its win by now
        deadline = time.monotonic() + 10  # on a loaded machine this one's win comes later
        terminated = truncated = False
        while not (terminated or truncated) and time.monotonic() < deadline:
            obs, reward, terminated, truncated, _ = env.step(call("scroll", direction="down"))
            time.sleep(0.1)
    finally:
        env.close()
    assert len(first_contexts) == 1  # the first episode's context (and popup) are gone
    assert reward == 1.0 and terminated  # this episode's own popup won, after its own wait
    # ... and no earlier: a fresh episode acting at once sees no win from the last one's
    env = env_for(site, "popper.html", check_js="localStorage.getItem('won') ? 1 : null")
    try:
        for _ in range(2):
            env.reset(seed=0)
            _, reward, _, _, _ = env.step(call("scroll", direction="down"))
            assert reward == 0
            time.sleep(1.3)
    finally:
        env.close()


def test_page_text_that_is_not_valid_unicode_is_cleaned(site):
    for screenshot in (False, True):
        env = env_for(site, "surrogates.html", screenshot=screenshot)
        try:
            obs, _ = env.reset(seed=0)
            after, *_ = env.step(call("scroll", direction="down"))
        finally:
            env.close()
        for message in [*obs, *after]:
            content = message["content"]
            texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
            for text in texts:
                text.encode("utf-8")  # raises on a lone surrogate
        page = obs[-1]["content"] if not screenshot else obs[-1]["content"][0]["text"]
        assert "lone \ufffd surrogate" in page and 'button "pay \ufffd"' in page


def test_a_check_answering_nan_or_infinity_is_no_reward(site):
    for answer in ("NaN", "Infinity", "-Infinity"):
        env = env_for(site, "calm.html", check_js=answer)
        try:
            env.reset(seed=0)
            obs, reward, terminated, _, info = env.step(call("click", element=button(env)))
        finally:
            env.close()
        assert math.isfinite(reward) and reward == 0 and not terminated, answer
        assert "finite number" in obs[0]["content"], obs
