"""MiniWoB++ in real headless Chromium: scripted solvers that act only through the env's
tools solve the tasks they were written for; a seed is a task instance; the task's own time
limit and reward are honoured; a browser killed mid-episode masks that episode and the next
ones run on a new browser."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

import toolgym
from toolgym.agents.collector import RolloutCollector, pools_of, requests_for
from toolgym.agents.engines.base import Capabilities, Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.trajectory import EpisodeEnd
from toolgym.envs import EnvPool, SeedTasks
from toolgym.envs.gui.miniwob import MiniWoBEnv
from toolgym.envs.gui.miniwob_pages import task_names
from toolgym.envs.gui.miniwob_solvers import SOLVERS
from toolgym.envs.resources import Resources
from toolgym.errors import ConfigError

SEEDS = (0, 1)


def call(name: str, **arguments) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def browser_pids() -> list[int]:
    """The browser processes toolgym's pools in this process started (not their children;
    not another test process's, which may run beside this one)."""
    parents: dict[int, int] = {}
    pools = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry.name)] = int(stat[1])
        if any(a.startswith(b"--toolgym-pool=") for a in argv) and not any(
            a.startswith(b"--type=") for a in argv
        ):
            pools.append(int(entry.name))
    return [pid for pid in pools if descends_from_us(pid, parents)]


def descends_from_us(pid: int, parents: dict[int, int]) -> bool:
    while pid > 1:
        pid = parents.get(pid, 0)
        if pid == os.getpid():
            return True
    return False


async def solve_episode(env: MiniWoBEnv, seed: int) -> tuple[float, int]:
    await env.areset(seed=seed)
    total = 0.0
    for turn in range(1, 7):
        action = env.scripted_action()
        assert action is not None, f"{env.task} seed {seed}: the solver had nothing at turn {turn}"
        _, reward, terminated, truncated, info = await env.astep(action)
        assert info["infra_error"] is None
        total += reward
        if terminated or truncated:
            return total, turn
    return total, 6


def test_scripted_solvers_reach_positive_reward_on_more_than_20_tasks():
    """Every solver, on two task instances each, through the env's tools only (the solvers
    read the outline the model reads); all share one browser, as a run's envs do."""

    async def main():
        resources = Resources()
        results = {}
        try:
            for task in sorted(SOLVERS):
                env = MiniWoBEnv(task=task)
                env.use_resources(resources)
                results[task] = [await solve_episode(env, seed) for seed in SEEDS]
                await env.aclose()
        finally:
            await resources.aclose()
        return results, resources.opened

    results, opened = asyncio.run(main())
    failed = {t: r for t, r in results.items() if not all(total > 0 for total, _ in r)}
    assert not failed
    assert len(results) >= 20
    assert opened == 1  # one browser pool for every task
    assert max(turns for r in results.values() for _, turns in r) >= 2  # multi-turn tasks too


def test_every_page_the_package_ships_is_registered():
    names = task_names()
    assert len(names) >= 100
    ids = set(toolgym.registered_ids())
    assert {f"toolgym/miniwob.{name}-v0" for name in names} <= ids


def test_a_seed_is_a_task_instance():
    env = toolgym.make("toolgym/miniwob.click-checkboxes-v0")
    try:
        first, info = env.reset(seed=5)
        again, info_again = env.reset(seed=5)
        other, _ = env.reset(seed=6)
    finally:
        env.close()
    assert first == again and info["state_key"] == info_again["state_key"]
    assert first != other
    text = first[-1]["content"]
    assert text.startswith("Task: Select") and "checkbox" in text and "[sync" not in text


def test_the_outline_lists_roles_names_values_and_flags():
    env = MiniWoBEnv(task="login-user")
    try:
        obs, _ = env.reset(seed=3)
        assert '] label "Username"' in obs[-1]["content"]
        box = next(n for n in env.tree.nodes if n["role"] == "textbox")
        obs, reward, terminated, _, info = env.step(call("type", element=box["id"], text="ann"))
    finally:
        env.close()
    assert info["valid_action"] and not terminated and reward == 0
    assert f'[{box["id"]}] textbox value="ann" focused clickable' in obs[-1]["content"]


def test_a_wrong_element_id_is_an_observation_the_model_reads():
    env = MiniWoBEnv(task="click-button")
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(call("click", element=999))
        after, *_ = env.step(call("press", key="NoSuchKey"))
    finally:
        env.close()
    assert not info["valid_action"] and info["infra_error"] is None
    assert not terminated and not truncated and reward == 0
    assert "no element [999] on the page" in obs[0]["content"]
    assert obs[-1]["content"].startswith("Page:\n")  # the page is shown again
    assert after[0]["content"].startswith("Error:") and "NoSuchKey" in after[0]["content"]


def test_the_tasks_own_time_limit_ends_the_episode():
    env = MiniWoBEnv(task="click-button", time_limit_s=0.3)
    try:
        env.reset(seed=0)
        time.sleep(0.6)
        button = next(n for n in env.tree.nodes if n["role"] == "button")
        obs, reward, terminated, _, info = env.step(call("click", element=button["id"]))
    finally:
        env.close()
    assert terminated and reward == -1.0 and info["infra_error"] is None  # the right button, late
    assert obs[-1]["content"] == "The task ended (reward -1)."


@pytest.mark.parametrize("idle", ["I will think about it.", "<tool_call>{not json</tool_call>"])
def test_running_out_the_clock_without_acting_scores_its_minus_one(idle):
    """Idling (text, or a malformed call) never scores better than acting: the clock's -1
    is read after any turn."""
    env = MiniWoBEnv(task="click-button", time_limit_s=0.3)
    try:
        env.reset(seed=0)
        time.sleep(0.6)
        obs, reward, terminated, _, info = env.step(idle)
    finally:
        env.close()
    assert (terminated, reward, info["solved"], info["infra_error"]) == (True, -1.0, False, None)


def test_select_toggles_options_of_a_list_box_that_takes_several():
    env = MiniWoBEnv(task="click-scroll-list")
    try:
        env.reset(seed=0)
        box = next(n for n in env.tree.nodes if n["role"] == "listbox")
        assert box["multiselectable"] and "multiselectable" in env.tree.text(4000)
        first, second = [n["name"] for n in env.tree.nodes if n["role"] == "option"][:2]
        env.step(call("select", element=box["id"], option=first))
        obs, *_ = env.step(call("select", element=box["id"], option=second))
        assert obs[0]["content"].startswith(f"Selected {second!r} in [{box['id']}] listbox")
        assert chosen(env) == {first, second}  # the second joins the first
        obs, *_ = env.step(call("select", element=box["id"], option=first))
        assert obs[0]["content"].startswith(f"Unselected {first!r}")
        assert chosen(env) == {second}
    finally:
        env.close()


def test_drag_moves_a_list_item_both_ways():
    env = MiniWoBEnv(task="drag-sort-numbers")
    try:
        env.reset(seed=0)
        items = [n for n in env.tree.nodes if n["role"] == "listitem"]
        names = [n["name"] for n in items]
        obs, *_ = env.step(call("drag", element=items[0]["id"], to=items[2]["id"]))  # down
        assert obs[0]["content"] == (
            f'Dragged [{items[0]["id"]}] listitem "{names[0]}" '
            f'onto [{items[2]["id"]}] listitem "{names[2]}".'
        )
        assert listed(env) == [names[1], names[2], names[0], *names[3:]]
        env.step(call("drag", element=items[-1]["id"], to=items[1]["id"]))  # up, to the top
        assert listed(env)[0] == names[-1]
    finally:
        env.close()


def listed(env: MiniWoBEnv) -> list[str]:
    return [n["name"] for n in env.tree.nodes if n["role"] == "listitem"]


def chosen(env: MiniWoBEnv) -> set[str]:
    return {n["name"] for n in env.tree.nodes if n["role"] == "option" and n.get("selected")}


def test_a_screenshot_with_marks_is_an_image_part():
    env = MiniWoBEnv(task="click-button", screenshot=True, marks=True)
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    text, image = obs[-1]["content"]
    assert text["type"] == "text" and text["text"].startswith("Task: ")
    assert image["type"] == "image_url"
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBOR")


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="no MiniWoB\\+\\+ task 'click-buton'. Did you mean"):
        MiniWoBEnv(task="click-buton")
    with pytest.raises(ConfigError, match="marks=True draws on the screenshot"):
        MiniWoBEnv(marks=True)
    with pytest.raises(ConfigError, match="does not exist or cannot run"):
        MiniWoBEnv(executable="/nonexistent/chromium").reset(seed=0)


class KillingEngine:
    """Presses Tab every turn (an episode that never ends by itself); on its third call it
    kills the browser first: episode 2's second turn finds it dead."""

    capabilities = Capabilities("shared")  # no weights to sync, no context kept

    def __init__(self, renderer: ChatRenderer, spare: set[int]) -> None:
        self.text = call("press", key="Tab")
        self.ids = renderer.encode(self.text) + renderer.closing_ids()
        self.calls, self.spare = 0, spare

    async def generate(self, prompt_ids, sampling, adapter=None):
        self.calls += 1
        if self.calls == 3:
            (pid,) = set(browser_pids()) - self.spare
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.5)
        return Completion(list(self.ids), [0.0] * len(self.ids), self.text, "stop")

    async def aclose(self):
        pass


def test_a_browser_killed_mid_episode_masks_that_episode_and_the_next_ones_run(tiny_tokenizer):
    renderer = ChatRenderer(tiny_tokenizer)
    before = set(browser_pids())  # any other test's, left to the garbage collector

    async def main():
        pool = EnvPool(lambda: MiniWoBEnv(task="click-button", max_turns=2), name="miniwob")
        engine = KillingEngine(renderer, before)
        config = RolloutConfig(SamplingParams(max_tokens=64), call_timeout_s=20.0)
        collector = RolloutCollector(engine, renderer, config, pools_of(pool), concurrency=1)
        try:
            groups = []
            for index in range(4):  # one after another: the kill lands in episode 2
                draw = SeedTasks().draw("train", index)
                groups += await collector.collect(requests_for(pool.ref, [draw]))
        finally:
            await pool.aclose()
        return [g.trajectories[0] for g in groups]

    trajectories = asyncio.run(main())
    ends = [t.end for t in trajectories]
    assert ends[1] == EpisodeEnd.INFRA_ERROR and "browser died" in trajectories[1].infra_error
    assert ends[0] == ends[2] == ends[3] == EpisodeEnd.TRUNCATED
    assert all(len(t.steps) == 2 for t in (trajectories[0], *trajectories[2:]))
    assert set(browser_pids()) <= before  # the new browser was closed with its pool


def test_toolgym_play_keeps_a_screenshot_of_the_page(cli, tmp_path):
    env = MiniWoBEnv(task="click-button")
    env.reset(seed=2)
    target = env.scripted_action()
    env.close()
    shot = tmp_path / "out.png"
    typed = ":solve\n" + target.replace("\n", "") + "\n"
    result = cli(
        "play",
        "toolgym/miniwob.click-button-v0",
        "--seed",
        "2",
        "--screenshot",
        str(shot),
        stdin=typed,
    )
    assert result.returncode == 0, result.stderr
    assert "Episode over (terminated) after 1 turn(s), return 1." in result.stdout
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    other = cli("play", "toolgym/Maze-v0", "--screenshot", str(tmp_path / "maze.png"), stdin="")
    assert other.returncode == 2 and "shows no page" in other.stdout
