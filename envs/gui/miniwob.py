"""toolgym/miniwob.<task>-v0: the MiniWoB++ tasks, from the `miniwob` package's own pages.

Observation: the task's instruction (its own `core.getUtterance()`), then the page outline
    (BrowserEnv), without MiniWoB's score display and start cover.
Reward: read from the task's JavaScript once it ends the episode: its raw reward, from -1 to 1
    (`reward="timed"`: MiniWoB's reward shrunk by the time taken, as its leaderboards count).
    Success is a reward above 0.
Time limit: the task's own (`core.EPISODE_MAX_TIME`, 10 s for most); when it runs out the
    page ends the episode with -1, read at the end of the next turn, whatever it held (an
    action, which can no longer change it, text or a malformed call: idling never scores
    better than acting). Policies slower than a person (a model on a CPU) can set
    `time_limit_s`.
Seed: seeds the page's random numbers (`Math.seedrandom`), so a seed is a task instance: the
    same seed gives the same page.
Arguments: task (a page name, e.g. "click-button"), reward, time_limit_s, plus BrowserEnv's
    (viewport 160x210 by default: MiniWoB's own task area).
Versions: v0, first release.
"""

from __future__ import annotations

from typing import Any

from toolgym.envs.gui.browser_env import BrowserEnv
from toolgym.envs.gui.miniwob_pages import pages_dir, task_names
from toolgym.envs.gui.miniwob_solvers import solve
from toolgym.envs.tasks import SeedTasks, TaskSource
from toolgym.errors import ConfigError, did_you_mean

READY_TIMEOUT_MS = 5000
START_JS = """([seed, limitMs]) => {
  if (limitMs !== null) core.EPISODE_MAX_TIME = limitMs;
  Math.seedrandom(seed);
  core.startEpisodeReal();
  // No start cover once the episode ends: a late action lands on the finished task, whose
  // verdict stands, instead of starting a new one.
  core.startEpisode = function () {};
}"""


class MiniWoBEnv(BrowserEnv):
    ignore = ("#reward-display", "#click-canvas", "#sync-task-cover", "#query")

    def __init__(
        self,
        task: str = "click-button",
        reward: str = "raw",
        time_limit_s: float | None = None,
        viewport: tuple[int, int] | list[int] = (160, 210),
        **kwargs: Any,
    ) -> None:
        super().__init__(viewport=viewport, **kwargs)
        names = task_names()
        if task not in names:
            raise ConfigError(f"no MiniWoB++ task {task!r}.{did_you_mean(task, names)}")
        if reward not in ("raw", "timed"):
            raise ConfigError(f"reward {reward!r}: choose 'raw' or 'timed'")
        if time_limit_s is not None and not 0 < time_limit_s <= 24 * 3600:
            raise ConfigError(f"time_limit_s {time_limit_s}: it must be above 0 (seconds)")
        self.task = task
        self.reward_kind = reward
        self.raw_reward = 0.0
        """MiniWoB's raw reward of the ended task: success is above 0, whatever `reward`."""
        self.time_limit_s = time_limit_s
        self.url = (pages_dir() / f"{task}.html").as_uri()

    def task_source(self) -> TaskSource:
        return SeedTasks()

    async def open_task(self, page: Any, seed: int | None, options: dict[str, Any] | None) -> str:
        seed = seed if seed is not None else int(self.np_random.integers(2**31))
        await page.goto(self.url, wait_until="load")
        limit_ms = None if self.time_limit_s is None else self.time_limit_s * 1000
        await page.evaluate(START_JS, [str(seed), limit_ms])
        await page.wait_for_function("WOB_TASK_READY", timeout=READY_TIMEOUT_MS)
        return str(await page.evaluate("core.getUtterance()"))

    async def read_outcome(self, page: Any) -> float | None:
        done, raw, timed = await page.evaluate(
            "[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_GLOBAL]"
        )
        if not done:
            return None
        self.raw_reward = float(raw)
        return float(raw if self.reward_kind == "raw" else timed)

    def task_solved(self) -> bool | None:
        return self.raw_reward > 0

    def scripted_action(self) -> str | None:
        """A solver written for this task that reads only the instruction and the outline
        (miniwob_solvers.py); None for tasks without one."""
        if self.tree is None or self.result is not None:
            return None
        calls = solve(self.task, self.instruction, self.tree)
        return None if calls is None else self.parser.render(calls)
