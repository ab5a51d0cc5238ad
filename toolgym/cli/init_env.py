"""`toolgym init-env NAME`: a new environment package that installs and passes as written:
an env with one tool, its tasks, the entry point that registers it, and a test that runs
toolgym's contract checks on it. Edit from there."""

from __future__ import annotations

import re
from pathlib import Path

from toolgym.cli.show import console

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{title}: a toolgym environment."
requires-python = ">=3.11"
dependencies = ["toolgym"]

[project.optional-dependencies]
test = ["pytest"]

# toolgym finds the env through this group: `toolgym list` shows it once installed, and
# `toolgym.make` / `gymnasium.make("{name}/{title}-v0")` build it after `import toolgym`.
[project.entry-points."toolgym.envs"]
{name} = "{name}.env:register_envs"

[tool.setuptools]
packages = ["{name}"]
"""

ENV = '''\
"""{name}/{title}-v0: reverse a word; the submit tool ends the episode.

Observation: the word to reverse. Tool: submit(answer). Reward: 1 for the word reversed,
else 0; the episode ends on submit, or is truncated after max_turns turns.
Tasks: {{"word": str}} rows; 10% of them held out for evaluation (ListTasks.load).
"""

from __future__ import annotations

from typing import Any

import toolgym

WORDS = ["river", "lantern", "copper", "meadow", "signal", "harbor", "puzzle", "garden",
         "marble", "velvet", "canyon", "thunder", "pepper", "silver", "anchor", "bridge"]


class {title}Env(toolgym.ToolEnv):
    instructions = "Reverse the word letter by letter and submit it with the submit tool."

    def __init__(self, tasks: Any = None, max_turns: int = 3, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.tasks = toolgym.ListTasks.load(tasks or [{{"word": w}} for w in WORDS])
        self.word, self.answer = "", None

    def task_source(self) -> toolgym.TaskSource:
        return self.tasks

    async def start(self, seed, options):
        given = (options or {{}}).get("task")
        task = given if given is not None else self.tasks.task("train", seed or 0)
        self.word, self.answer = str(task["word"]), None
        return [{{"role": "user", "content": f"Reverse this word: {{self.word}}"}}]

    @toolgym.tool
    async def submit(self, answer: str) -> str:
        """Submit the reversed word (ends the episode)."""
        self.answer = answer.strip()
        return "correct" if self.answer == self.word[::-1] else "wrong"

    def outcome(self) -> toolgym.Outcome:
        if self.answer is None:
            return toolgym.Outcome()
        return toolgym.Outcome(reward=float(self.answer == self.word[::-1]), terminated=True)

    def scripted_action(self) -> str:
        """The right move, for `toolgym sft` demonstrations and `toolgym check`."""
        return self.parser.render([toolgym.ToolCall("submit", {{"answer": self.word[::-1]}})])


def register_envs() -> None:
    toolgym.register(
        "{name}/{title}-v0", "{name}.env:{title}Env", description="reverse a word; submit"
    )
'''

TEST = '''\
"""The env honours toolgym's Env contract, and its scripted solver wins."""

import toolgym
from toolgym.envs.checker import check_env


def test_the_env_passes_toolgyms_checks():
    report = check_env("{name}/{title}-v0")
    assert not report.failures(), [str(f) for f in report.failures()]


def test_the_scripted_solver_wins():
    env = toolgym.make("{name}/{title}-v0")
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(env.unwrapped.scripted_action())
    assert reward == 1.0 and terminated
    env.close()
'''

README = """\
# {dist}

`{name}/{title}-v0`, a toolgym environment. Install it and try it:

```bash
pip install -e .
toolgym list --filter {name}
toolgym check {name}/{title}-v0
toolgym play {name}/{title}-v0
pytest tests
```

`{name}/env.py` holds the env: edit its tasks, its tools (`@toolgym.tool` methods) and its
`outcome`. `toolgym check` runs the same contract checks as the test.
"""


def init_env_command(name: str, out: Path | None) -> int:
    from toolgym.errors import ConfigError

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(
            f"package name {name!r}: use lower-case letters, digits and underscores, starting "
            "with a letter (e.g. word_games)"
        )
    folder = out or Path(name)
    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(f"{folder} exists and is not empty; choose another --out")
    title = "".join(part.capitalize() for part in name.split("_"))
    fields = {"name": name, "title": title, "dist": name.replace("_", "-")}
    files = {
        "pyproject.toml": PYPROJECT, f"{name}/__init__.py": '"""{title}: a toolgym env."""\n',
        f"{name}/env.py": ENV, "tests/test_env.py": TEST, "README.md": README,
    }  # fmt: skip
    for relative, template in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields))
    console.print(f"wrote {folder}/ with {name}/{title}-v0. Next:", markup=False)
    console.print(
        f"  cd {folder} && pip install -e . && toolgym check {name}/{title}-v0 && pytest tests",
        markup=False,
    )
    return 0
