"""toolgym/Web-v0 on the example shop served over loopback by a real HTTP server: every tool
does what it says to a real page, checks in JavaScript and in Python end episodes with their
reward, and the browser reaches nothing but loopback."""

from __future__ import annotations

import json

import pytest

from conftest import static_site
from toolgym.envs.gui.web import EXAMPLE, WebEnv
from toolgym.errors import ConfigError

SIGN_UP_ADA = (
    "shop.signup && (shop.signup.name === 'Ada' && shop.signup.country === 'Peru' "
    "&& !shop.signup.news ? 1 : 0)"
)


@pytest.fixture(scope="module")
def shop_url():
    yield from static_site(EXAMPLE, "shop.html")


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def node_id(env: WebEnv, name: str, role: str | None = None) -> int:
    return next(n["id"] for n in env.tree.nodes if n["name"] == name and role in (None, n["role"]))


def shop(shop_url, instruction, check_js=None, **task) -> WebEnv:
    task = {"url": "shop.html", "instruction": instruction, **task}
    if check_js:
        task["check_js"] = check_js
    return WebEnv(tasks=[task], base_url=shop_url)


def test_type_select_and_click_sign_up(shop_url):
    env = shop(shop_url, "Sign up as Ada from Peru, without news.", SIGN_UP_ADA)
    try:
        obs, info = env.reset(seed=0)
        assert obs[-1]["content"].startswith(
            "Task: Sign up as Ada from Peru, without news.\n\nPage:"
        )
        name, country = node_id(env, "Name", "textbox"), node_id(env, "Country", "combobox")
        obs, reward, terminated, _, step_info = env.step(
            call("type", element=name, text="Ada") + call("select", element=country, option="Peru")
        )
        assert reward == 0 and not terminated and step_info["valid_action"]
        assert (
            'value="Ada"' in obs[-1]["content"]
            and 'combobox "Country" value="Peru"' in obs[-1]["content"]
        )
        assert step_info["state_key"] != info["state_key"]  # the page changed
        obs, reward, terminated, _, _ = env.step(
            call("click", element=node_id(env, "Sign up", "button"))
        )
    finally:
        env.close()
    assert terminated and reward == 1.0


def test_a_wrong_answer_ends_with_the_checks_reward(shop_url):
    env = shop(shop_url, "Sign up as Ada from Peru, without news.", SIGN_UP_ADA)
    try:
        env.reset(seed=0)
        box = node_id(env, "Send me news", "checkbox")
        env.step(
            call("type", element=node_id(env, "Name", "textbox"), text="Ada")
            + call("click", element=box)
        )
        assert env.tree.node(box)["checked"]
        _, reward, terminated, _, _ = env.step(call("press", key="Enter"))  # Enter submits the form
    finally:
        env.close()
    assert terminated and reward == 0.0


def test_hover_shows_a_menu_that_is_then_clicked(shop_url):
    env = shop(shop_url, "Find how to contact the shop.", "shop.contact")
    try:
        env.reset(seed=0)
        assert all(n["name"] != "Contact us" for n in env.tree.nodes)  # hidden until hovered
        obs, reward, terminated, *_ = env.step(call("hover", element=node_id(env, "Help")))
        assert not terminated and '] link "Contact us" clickable' in obs[-1]["content"]
        _, reward, terminated, *_ = env.step(call("click", element=node_id(env, "Contact us")))
    finally:
        env.close()
    assert terminated and reward == 1.0


def test_scrolling_a_box_brings_its_items_into_view(shop_url):
    env = shop(
        shop_url, "Buy item 27.", "shop.bought === null ? null : (shop.bought === 27 ? 1 : 0)"
    )
    try:
        env.reset(seed=0)
        item = node_id(env, "Buy item 27")
        assert not env.tree.node(item)["visible"]
        box = next(n["id"] for n in env.tree.nodes if n.get("scrollable"))
        for _ in range(6):
            if env.tree.node(item)["visible"]:
                break
            obs, reward, terminated, _, info = env.step(
                call("scroll", direction="down", element=box)
            )
            assert info["valid_action"] and not terminated
        assert env.tree.node(item)["visible"]
        _, reward, terminated, *_ = env.step(call("click", element=item))
    finally:
        env.close()
    assert terminated and reward == 1.0


SQUARE_CHECK = "shop.square === null ? null : (shop.square ? 1 : 0)"


def test_click_at_reaches_a_canvas_by_coordinates_and_a_miss_ends_the_task(shop_url):
    env = shop(shop_url, "Click the red square.", SQUARE_CHECK)
    try:
        obs, _ = env.reset(seed=0)
        canvas = next(n for n in env.tree.nodes if n["role"] == "canvas")
        x, y, _, _ = canvas["box"]
        assert f"canvas at ({x}, {y})" in obs[-1]["content"]
        _, hit, hit_ended, *_ = env.step(call("click_at", x=x + 95, y=y + 35))  # the square
        env.reset(seed=0)
        _, missed, miss_ended, *_ = env.step(call("click_at", x=x + 5, y=y + 5))  # white
    finally:
        env.close()
    assert (hit, hit_ended) == (1.0, True)
    assert (missed, miss_ended) == (0.0, True)  # blind clicks cannot sweep the canvas


def test_a_python_check_reads_the_page(shop_url):
    env = shop(
        shop_url, "Sign up as Bo from Kenya.", check="web_checks:status_welcomes",
        expect="Welcome, Bo from Kenya!",
    )  # fmt: skip
    try:
        env.reset(seed=0)
        country = node_id(env, "Country", "combobox")
        _, reward, terminated, *_ = env.step(
            call("type", element=node_id(env, "Name", "textbox"), text="Bo")
            + call("select", element=country, option="Kenya")
            + call("click", element=node_id(env, "Sign up", "button"))
        )
    finally:
        env.close()
    assert terminated and reward == 1.0


def test_the_default_tasks_are_the_example_shop_from_the_package():
    env = WebEnv()
    try:
        obs, _ = env.reset(seed=4)
    finally:
        env.close()
    assert obs[-1]["content"].startswith("Task: Buy item 27 from the catalogue.")


def test_only_loopback_is_reachable(shop_url):
    """A host name goes to the closed loopback proxy (no lookup, no packet leaves)."""
    env = WebEnv(tasks=[{"url": "http://shop.example.test/", "instruction": "x", "check_js": "1"}])
    try:
        with pytest.raises(Exception, match="ERR_PROXY_CONNECTION_FAILED"):
            env.reset(seed=0)
        allowed = shop(shop_url, "x", "false")
        allowed.reset(seed=0)
        allowed.close()
    finally:
        env.close()


def test_a_huge_page_gives_a_bounded_outline(shop_url, tmp_path):
    page = tmp_path / "huge.html"
    page.write_text("<body>" + "<button>press me please</button>" * 20_000 + "</body>")
    env = WebEnv(
        tasks=[{"url": page.as_uri(), "instruction": "x", "check_js": "false"}], max_chars=3000
    )
    try:
        obs, _ = env.reset(seed=0)
        _, _, _, _, info = env.step(call("click", element=env.tree.nodes[-1]["id"]))
    finally:
        env.close()
    text = obs[-1]["content"]
    assert len(text) < 3200 and text.endswith("more lines not shown]")
    assert info["valid_action"]


def test_tasks_without_a_check_or_a_url_are_refused_before_a_browser_starts():
    with pytest.raises(ConfigError, match="task 0 needs a success check"):
        WebEnv(tasks=[{"url": "http://127.0.0.1:9/", "instruction": "x"}])
    with pytest.raises(ConfigError, match="task 0 needs a 'url' and an 'instruction'"):
        WebEnv(tasks=[{"instruction": "x", "check_js": "1"}])
    with pytest.raises(ConfigError, match="success check 'nomodule' must look like"):
        WebEnv(check="nomodule")
    env = WebEnv(tasks=[{"url": "http://127.0.0.1:9/", "instruction": "x", "check_js": "1"}])
    try:  # a task given at reset is checked there
        with pytest.raises(ConfigError, match="needs a success check"):
            env.reset(options={"task": {"url": "http://127.0.0.1:9/", "instruction": "x"}})
    finally:
        env.close()


def test_a_covered_element_is_not_clicked_through(tmp_path):
    page = tmp_path / "covered.html"
    page.write_text(
        "<body><button onclick='window.hit = true'>Pay</button>"
        "<div style='position:fixed;inset:0;background:#fff8' aria-label='Cookie banner'></div>"
        "<select><option>a</option><option>b</option></select></body>"
    )
    env = WebEnv(
        tasks=[{"url": page.as_uri(), "instruction": "x", "check_js": "window.hit ? 1 : null"}]
    )
    try:
        env.reset(seed=0)
        pay = node_id(env, "Pay", "button")
        assert not env.tree.node(pay)["visible"]  # the outline says so before any click
        obs, reward, terminated, _, info = env.step(call("click", element=pay))
        option = node_id(env, "b", "option")
        after, *_ = env.step(call("click", element=option))
    finally:
        env.close()
    assert not terminated and reward == 0 and not info["valid_action"]
    assert 'another element covers it (div "Cookie banner")' in obs[0]["content"]
    assert "choose an option with select on its list" in after[0]["content"]


def test_an_episode_starts_without_what_the_last_one_stored(shop_url):
    """Each episode has a context of its own, so what a page stored (cookies, local and
    session storage) is gone by the next: the same task starts from the same state."""
    env = shop(shop_url, "x", "false")
    seen = []
    try:
        for _ in range(2):
            env.reset(seed=0)
            seen.append(env._run_sync(env.lease.page.evaluate(STORE_AND_COUNT)))
    finally:
        env.close()
    assert seen == [1, 1]


STORE_AND_COUNT = """() => {
  const visits = Number(localStorage.getItem('visits') || 0) + 1;
  localStorage.setItem('visits', visits);
  sessionStorage.setItem('visits', visits);
  document.cookie = 'visits=' + visits;
  return visits;
}"""


def test_overlong_arguments_are_refused_before_they_reach_the_browser(shop_url):
    env = shop(shop_url, "Sign up as Ada from Peru, without news.", SIGN_UP_ADA)
    try:
        env.reset(seed=0)
        name, country = node_id(env, "Name", "textbox"), node_id(env, "Country", "combobox")
        huge = "x" * 1_000_000
        for action, limit in (
            (call("type", element=name, text=huge), "text is 1000000 characters; at most 500"),
            (call("press", key=huge), "key is 1000000 characters; at most 60"),
            (call("select", element=country, option=huge), "option is 1000000 characters"),
        ):
            obs, reward, terminated, _, _ = env.step(action)
            assert limit in obs[0]["content"] and len(obs[0]["content"]) < 2000
            assert reward == 0 and not terminated
        assert 'value="Ada"' not in obs[-1]["content"]  # nothing was typed
    finally:
        env.close()
