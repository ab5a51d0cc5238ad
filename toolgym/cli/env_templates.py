"""The files `toolgym init-env` writes, as templates (`str.format` fields: name, title,
dist). One game in both variants: cards lie on a table, each with a tag, and the word under a
card is fixed by its tag alone, so the model must look (`peek`) before it answers
(`submit`). The plain variant declares `peek` as a `@toolgym.tool` method; `--mcp` serves it
from an MCP server written with the installed MCP SDK, which the env reaches through
MCPTools."""

from __future__ import annotations

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{title}: a toolgym environment."
requires-python = ">=3.11"
dependencies = ["{requirement}"]

[project.optional-dependencies]
test = ["pytest"]

# toolgym finds the env through this group: `toolgym list` shows it once installed, and
# `toolgym.make` / `gymnasium.make("{name}/{title}-v0")` build it after `import toolgym`.
[project.entry-points."toolgym.envs"]
{name} = "{name}.env:register_envs"

[tool.setuptools]
packages = ["{name}"]
"""

CARDS = '''\
"""The cards of the game. A task lays three cards on a numbered table, each with a tag
("amber-42"), and names the one whose word to find. The word under a card is fixed by the
table and the tag together (a hash): nobody knows it without looking, and no word learned on
one table says anything about another, so a held-out task is new to the model."""

from __future__ import annotations

import hashlib
import random

COLOURS = ["amber", "teal", "rose", "slate", "olive", "coral", "indigo", "ivory"]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "so", "ta", "vi", "be", "do", "fu", "ga", "hi",
             "jo", "pe", "zu"]


def word_under(table: int, tag: str) -> str:
    """The word under the card tagged `tag` on table `table`: two syllables by a hash."""
    digest = hashlib.sha256(f"{{table}}:{{tag}}".encode()).digest()
    return "".join(SYLLABLES[byte % len(SYLLABLES)] for byte in digest[:2])


def make_task(index: int) -> dict:
    """Task `index`: a table, three distinct tags on it, and the one the question names."""
    rng = random.Random(index)
    tags: list[str] = []
    while len(tags) < 3:
        tag = f"{{rng.choice(COLOURS)}}-{{rng.randint(10, 99)}}"
        if tag not in tags:
            tags.append(tag)
    return {{"table": rng.randint(1000, 9999), "cards": tags, "target": rng.choice(tags)}}


def question(task: dict) -> str:
    return (f"Table {{task['table']}}. Cards on it: {{', '.join(task['cards'])}}. "
            f"Find the word under the card {{task['target']}} and submit it.")
'''

ENV = '''\
"""{name}/{title}-v0: find the word under a card; peek, then submit.

Observation: a table's number, the tags of three cards on it, and the one to find.
Tools: peek shows the word under a card{peek_where}; submit(word) ends the episode.
Reward: 1 for the named card's word, else 0; truncated after max_turns turns.
Tasks: `size` generated tasks (cards.py), or a JSONL of {{"table", "cards", "target"}} rows. ListTasks
    holds 10% of the distinct tasks out for evaluation, chosen by content, so an eval task
    never appears in training.
Solver: peek at the named card, submit its word (for `toolgym sft` and `toolgym check`).
"""

from __future__ import annotations
{imports}
from typing import Any

import toolgym
from toolgym import ToolCall
{extra_imports}
from {name}.cards import make_task, question, word_under


class {title}Env(toolgym.ToolEnv):
    instructions = "Peek at the card the task names, then submit the word under it."

    def __init__(self, tasks: Any = None, size: int = 2000, max_turns: int = 4,
                 **kwargs: Any) -> None:{server_line}
        super().__init__(max_turns=max_turns,{tool_sources} **kwargs)
        self.tasks = toolgym.ListTasks.load(tasks or [make_task(i) for i in range(size)])
        self.task: dict[str, Any] = {{}}
        self.peeked: list[str] = []
        self.submitted: str | None = None

    def task_source(self) -> toolgym.TaskSource:
        return self.tasks

    async def start(self, seed, options):
        given = (options or {{}}).get("task")
        self.task = dict(given if given is not None else self.tasks.task("train", seed or 0))
        self.peeked, self.submitted = [], None
        return [{{"role": "user", "content": question(self.task)}}]
{peek_tool}
    @toolgym.tool
    async def submit(self, word: str) -> str:
        """Submit the word under the card the task names; this ends the episode.

        Args:
            word: the word, as peek showed it.
        """
        self.submitted = word.strip()
        return "correct" if self.submitted == self.answer() else "wrong"

    def answer(self) -> str:
        return word_under(self.task["table"], self.task["target"])

    def outcome(self) -> toolgym.Outcome:
        if self.submitted is None:
            return toolgym.Outcome()
        return toolgym.Outcome(reward=float(self.submitted == self.answer()), terminated=True)

    def scripted_action(self) -> str:
        """Peek at the named card, then submit its word."""
        target = self.task["target"]
        if target not in self.peeked:
            return self.parser.render([ToolCall("peek", self.peek_arguments(target))])
        return self.parser.render([ToolCall("submit", {{"word": self.answer()}})])

    def mistake_action(self, rng) -> str:
        """A peek at a card the task does not name (demonstrations of recovering)."""
        others = [t for t in self.task["cards"] if t != self.task["target"]]
        return self.parser.render([ToolCall("peek", self.peek_arguments(rng.choice(others)))])

    def peek_arguments(self, tag: str) -> dict[str, Any]:
        return {peek_arguments}
{peek_record}

def register_envs() -> None:
    toolgym.register("{name}/{title}-v0", "{name}.env:{title}Env",
                     description="find the word under a card: peek, then submit")
'''

PEEK_TOOL = '''
    @toolgym.tool
    async def peek(self, tag: str) -> str:
        """Look at the word under a card on the table.

        Args:
            tag: the card's tag, e.g. "amber-42".
        """
        if tag not in self.task["cards"]:
            cards = ", ".join(self.task["cards"])
            raise toolgym.ToolCallError(f"no card is tagged {{tag!r}}; the cards: {{cards}}")
        self.peeked.append(tag)
        return f"Under {{tag}}: {{word_under(self.task['table'], tag)}}"
'''

SERVER_LINE = """
        # peek comes from the package's own MCP server, started over stdio (it finds this
        # package wherever it is installed)
        server = MCPTools({{"command": [sys.executable, "-m", "{name}.server"],
                           "env": {{"PYTHONPATH": str(Path(__file__).resolve().parents[1])}}}})"""

PEEK_RECORD = '''
    async def astep(self, action: str):
        """The server's peek keeps no episode: the env notes the cards its turns looked at."""
        returned = await super().astep(action)
        self.peeked += [c["arguments"].get("tag") for c in returned[4]["tool_calls"]
                        if c["name"] == "peek" and c["error"] is None]
        return returned
'''

SERVER = '''\
"""The card table as an MCP server, written with the MCP SDK's own MCPServer: one tool, peek.
Run it over stdio (`python -m {name}.server`), as {name}/env.py does through MCPTools, or
over HTTP (`python -m {name}.server http`) for any MCP client."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

from {name}.cards import word_under

server = MCPServer("{name}")


@server.tool()
def peek(table: int, tag: str) -> str:
    """Look at the word under a card on a table (a server keeps no episode, so it is told
    which table).

    Args:
        table: the table's number, e.g. 4817.
        tag: the card's tag, e.g. "amber-42".
    """
    return f"Under {{tag}}: {{word_under(table, tag)}}"


if __name__ == "__main__":
    server.run("streamable-http" if sys.argv[1:] == ["http"] else "stdio")
'''

CONFIG = """\
# Train {name}/{title}-v0 with GiGPO from a fine-tuned model (docs: "Train your own env").
#   toolgym model pretrain --out models/base --size tiny --env {name}/{title}-v0
#   toolgym sft {name}/{title}-v0 --model models/base --out runs/sft \\
#       --episodes 1200 --epochs 4 --no-tool-schemas
#   toolgym train --config configs/train.yaml model=runs/sft run_dir=runs/rl
steps: 20
env:
  id: {name}/{title}-v0
  kwargs: {{invalid_action_reward: -0.2}}  # a malformed turn costs: a signal for the format
rollout:
  tasks_per_step: 8
  rollouts_per_task: 4
  max_tokens: 48
  tool_schemas_in_prompt: false  # as the SFT above was trained
advantage:
  estimator: gigpo
optim:
  lr: 2.0e-4
  micro_batch_size: 16
  minibatches: 2
eval:
  every_steps: 20
  episodes: 128
  at_start: true
"""

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
    for _ in range(2):  # peek, then submit
        _, reward, terminated, _, _ = env.step(env.unwrapped.scripted_action())
    assert reward == 1.0 and terminated
    env.close()
'''

README = """\
# {dist}

`{name}/{title}-v0`, a toolgym environment{variant}. Install it and try it:

```bash
pip install -e .
toolgym list --filter {name}
toolgym check {name}/{title}-v0
toolgym play {name}/{title}-v0
pytest tests
```

`{name}/env.py` holds the env: its tasks, its tools and its `outcome`; `{name}/cards.py` the
game's cards. `configs/train.yaml` trains it (toolgym's guide, "Train your own env", walks
through pretraining a base, fine-tuning it on the solver and training with GiGPO).
"""


def package_files(name: str, mcp: bool) -> dict[str, str]:
    """The package's files (path -> text) for `name`, with or without the MCP server."""
    title = "".join(part.capitalize() for part in name.split("_"))
    fields = {
        "name": name, "title": title, "dist": name.replace("_", "-"),
        "requirement": "toolgym[mcp]" if mcp else "toolgym",
        "variant": f", its peek tool served by an MCP server ({name}/server.py)"
        if mcp else "",
    }  # fmt: skip
    env_fields = {
        **fields,
        "peek_where": " (served by the MCP\n    server in server.py)" if mcp else "",
        "imports": "\nimport sys\nfrom pathlib import Path" if mcp else "",
        "extra_imports": "from toolgym.tools.mcp import MCPTools\n" if mcp else "",
        "server_line": SERVER_LINE.format(**fields) if mcp else "",
        "tool_sources": " tool_sources=[server]," if mcp else "",
        "peek_tool": "" if mcp else PEEK_TOOL.format(**fields),
        "peek_record": PEEK_RECORD if mcp else "",
        "peek_arguments": '{"table": self.task["table"], "tag": tag}' if mcp else '{"tag": tag}',
    }  # fmt: skip
    files = {
        "pyproject.toml": PYPROJECT.format(**fields),
        f"{name}/__init__.py": f'"""{title}: a toolgym env."""\n',
        f"{name}/cards.py": CARDS.format(**fields),
        f"{name}/env.py": ENV.format(**env_fields),
        "configs/train.yaml": CONFIG.format(**fields),
        "tests/test_env.py": TEST.format(**fields),
        "README.md": README.format(**fields),
    }
    if mcp:
        files[f"{name}/server.py"] = SERVER.format(**fields)
    return files
