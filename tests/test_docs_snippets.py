"""Every shell and Python block in the guide (docs/) says how it is checked, on the line above
it:
- `<!-- snippet: run -->`: run here as written, the page's blocks in order in one folder that
  holds the checkout's `configs/` and `bench/` (a later block uses what an earlier one made);
- `<!-- snippet: tested-by tests/FILE.py::NAME, ... -->`: those tests run it at a smaller
  scale (a whole recipe, a cluster, a user's own data or model);
- `<!-- snippet: excerpt-of PATH -->`: the lines are the file's own, which its tests run;
- `<!-- snippet: gpu-only: REASON -->`.
Every `toolgym` command in any block must also parse: its sub-command and each option it
names exist."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from blocks import run_block, user_env
from typer.testing import CliRunner

from conftest import ROOT, WARM
from toolgym.cli import app

DOCS = ROOT / "docs"
CHECKED = {"bash", "sh", "shell", "console", "python", "py"}
"""The languages whose blocks must be run, tested elsewhere or marked GPU-only."""
MARKER = re.compile(r"<!-- snippet: (run|tested-by .+|excerpt-of \S+|gpu-only: .+) -->$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    marker: str
    """The marker's text after `snippet: `, empty when the line above has none."""

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines, found, i = page.read_text().splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            above = MARKER.match(lines[i - 1].strip()) if i else None
            found.append(Block(page.name, i + 1, lines[i][3:].strip(), "\n".join(lines[i + 1 : end]),
                               above.group(1) if above else ""))  # fmt: skip
            i = end
        i += 1
    return found


PAGES = sorted(DOCS.glob("*.md"))
ALL = [b for page in PAGES for b in blocks(page)]
CODE = [b for b in ALL if b.language in CHECKED]


def test_every_block_names_its_language():
    assert all(b.language for b in ALL), [b.where for b in ALL if not b.language]


def test_every_shell_and_python_block_says_how_it_is_checked():
    assert [b.where for b in CODE if not b.marker] == []
    assert len([b for b in CODE if b.marker == "run"]) >= 10


@pytest.mark.parametrize("block", [b for b in CODE if b.marker.startswith("tested-by")],
                         ids=lambda b: b.where)  # fmt: skip
def test_the_tests_a_block_names_exist(block):
    for name in block.marker.removeprefix("tested-by ").split(", "):
        named = re.fullmatch(r"(tests/\w+\.py)::(\w+)", name)
        assert named, f"{block.where}: tested-by takes tests/FILE.py::NAME, ..."
        source = (ROOT / named.group(1)).read_text()
        assert re.search(rf"^(async )?def {named.group(2)}\(", source, re.M), (block.where, name)


def plain_lines(text: str) -> list[str]:
    return [
        re.sub(r"\s+# fmt: skip$", "", line).strip() for line in text.splitlines() if line.strip()
    ]


@pytest.mark.parametrize("block", [b for b in CODE if b.marker.startswith("excerpt-of")],
                         ids=lambda b: b.where)  # fmt: skip
def test_an_excerpt_is_the_files_own_lines(block):
    source = plain_lines((ROOT / block.marker.removeprefix("excerpt-of ")).read_text())
    excerpt = plain_lines(block.code)
    assert any(source[i : i + len(excerpt)] == excerpt for i in range(len(source))), block.where


def toolgym_commands(code: str) -> list[list[str]]:
    """The argument lists of the `toolgym` commands in a shell block (also after `-m
    toolgym`, as torchrun starts it), leaving out heredocs' text."""
    found, heredoc_end = [], None
    for line in code.replace("\\\n", " ").splitlines():
        if heredoc_end is not None:
            heredoc_end = None if line.strip() == heredoc_end else heredoc_end
            continue
        if heredoc := re.search(r"<<-?'?(\w+)'?", line):
            heredoc_end = heredoc.group(1)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word.strip(";&|"):
                command.append(word)
                continue
            starts = [
                i
                for i, w in enumerate(command)
                if w == "toolgym" and (i == 0 or command[i - 1] == "-m")
            ]
            found += [command[i + 1 :] for i in starts[:1]]
            command = []
    return found


COMMANDS = [
    pytest.param(args, id=f"{b.page}:{b.line}:{' '.join(args[:2])}")
    for b in CODE
    if b.language in {"bash", "sh", "shell", "console"}
    for args in toolgym_commands(b.code)
]


def test_the_guide_has_commands_to_parse():
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize("args", COMMANDS)
def test_each_toolgym_command_parses(args):
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output[-2000:]


def as_shell(block: Block) -> str:
    if block.language in {"python", "py"}:
        return f"python - <<'SNIPPET'\n{block.code}\nSNIPPET"
    return block.code


OUTSIDE = {"sql.md": ["/tmp/pg"]}
"""What a page's blocks make outside their folder (PostgreSQL's data must be where its own
user can reach it), removed afterwards unless it was there before."""
RUN = {
    page: [b for b in CODE if b.page == page and b.marker == "run"]
    for page in {b.page for b in CODE}
}


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(p for p, run in RUN.items() if run))
def test_the_blocks_marked_run_run_as_written(page, tmp_path):
    for shipped in ("configs", "bench"):  # a checkout's, as the guide's commands assume
        (tmp_path / shipped).symlink_to(ROOT / shipped)
    made = [p for p in map(Path, OUTSIDE.get(page, [])) if not p.exists()]
    try:
        env = user_env(Path(sys.executable).parent)
        warm = WARM.bin_dir()  # its `toolgym` skips importing torch and transformers afresh
        if warm:
            env["PATH"] = f"{warm}:{env['PATH']}"
        for block in RUN[page]:
            run_block(as_shell(block), tmp_path, env)
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
