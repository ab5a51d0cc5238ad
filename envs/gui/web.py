"""toolgym/Web-v0: any web app as an environment, from tasks that say where to start, what to
do, and how to tell it is done.

A task: {"url": the start page (absolute, or relative to `base_url`), "instruction": what to
    do, and a success check: "check_js", a JavaScript expression evaluated in the page after
    every action, or "check", a Python function "package.module:function" called as
    check(page, task) (Playwright's async Page; it may be async)}. Checks the env is given
    (`check_js=` / `check=`) apply to tasks that have none.
The check's answer: a finite number ends the episode with that reward; true ends it with 1; false,
    null or nothing means not done yet (the episode then ends at `max_turns`, reward 0).
Seed: task `seed` of the train split (as every list-of-tasks env): the same seed, the same
    task and start page.
Default: the example shop (envs/gui/example: a sign-up form, a hover menu, a scrolling
    catalogue and a canvas) with its seven tasks, opened from the package's files.
Arguments: tasks (JSONL path or list of dicts), base_url, check_js, check, plus BrowserEnv's.
    Pages on other hosts than loopback need `offline=False`.
Versions: v0, first release.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Iterable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from toolgym.envs.gui.browser_env import BrowserEnv
from toolgym.envs.tasks import ListTasks, TaskSource, choose_task
from toolgym.envs.tasks import client as client_tasks
from toolgym.errors import ConfigError
from toolgym.imports import load_callable

EXAMPLE = Path(str(files("toolgym.envs.gui").joinpath("example")))


class WebEnv(BrowserEnv):
    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        base_url: str | None = None,
        check_js: str | None = None,
        check: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if tasks is None:
            tasks, base_url = EXAMPLE / "tasks.jsonl", base_url or EXAMPLE.as_uri() + "/"
        self.tasks = ListTasks.load(tasks)
        self.base_url = base_url
        self.check_js = check_js
        self.check = load_callable(check, "success check") if check else None
        self.task: dict[str, Any] = {}
        self._task_check: Any = None
        for split in ("train", "eval", "test"):  # before any browser starts
            for index in range(self.tasks.size(split) or 0):
                self.check_task(self.tasks.task(split, index), f"{split} task {index}")

    def task_source(self) -> TaskSource:
        return self.tasks

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """A public http(s) page, an instruction and a `check_js` run in that page: never a
        Python `check` (code the server would import), a file or a loopback page."""
        given = client_tasks.only_fields(task, ("url", "instruction", "check_js"), "web task")
        client_tasks.public_url(given.get("url"))
        client_tasks.text(given.get("instruction"), "instruction")
        if "check_js" in given:
            client_tasks.text(given["check_js"], "check_js", 4000)
        self.check_task(given, "a client's web task")
        return given

    async def open_task(self, page: Any, seed: int | None, options: dict[str, Any] | None) -> str:
        seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(seed, options, self.tasks, self._no_generator)
        url = self.check_task(task)
        self.task = task
        self._task_check = (
            load_callable(task["check"], "success check") if task.get("check") else None
        )
        response = await page.goto(url, wait_until="load")
        if response is not None and response.status >= 400:
            raise ConfigError(f"{url} answered HTTP {response.status}")
        return str(task["instruction"])

    async def read_outcome(self, page: Any) -> float | None:
        script = self.task.get("check_js")
        function = self._task_check
        if not script and function is None:
            script, function = self.check_js, self.check
        if script:
            value = await page.evaluate(f"() => ({script})")
        else:
            value = function(page, self.task)
            if inspect.isawaitable(value):
                value = await value
        return _verdict(value)

    def check_task(self, task: Mapping[str, Any], label: str = "a web task") -> str:
        """The start page's url of a task this env can open, or a ConfigError saying what
        the task lacks."""
        if not isinstance(task.get("url"), str) or not isinstance(task.get("instruction"), str):
            raise ConfigError(
                f"{label} needs a 'url' and an 'instruction'; got keys {sorted(task)}"
            )
        if not (task.get("check_js") or task.get("check") or self.check_js or self.check):
            raise ConfigError(f"{label} needs a success check: 'check_js' or 'check'")
        url = urljoin(self.base_url, task["url"]) if self.base_url else task["url"]
        if "://" not in url:
            raise ConfigError(
                f"{label}'s url {task['url']!r} is relative and the env has no base_url"
            )
        return url

    @staticmethod
    def _no_generator(seed: int) -> dict[str, Any]:
        raise ConfigError("WebEnv's tasks come from its task list; there is no generator")


def _verdict(value: Any) -> float | None:
    if value is None or value is False:
        return None
    if value is True:
        return 1.0
    if isinstance(value, numbers.Real) and math.isfinite(value):
        return float(value)
    raise ConfigError(
        f"a success check answered {value!r}: answer a finite number, true, false or null"
    )
