"""toolgym's own environments. Adding one is one file and one `register` line here; the
contract test over every registered id then covers it."""

from __future__ import annotations

from toolgym.envs.gui.miniwob import NONDETERMINISTIC, task_names
from toolgym.envs.registration import register


def register_builtin_envs() -> None:
    register(
        "toolgym/Maze-v0",
        "toolgym.envs.maze:MazeEnv",
        description="grid maze with keys and doors; move / pick_up / open_door",
    )
    register(
        "toolgym/Arithmetic-v0",
        "toolgym.envs.arithmetic:ArithmeticEnv",
        description="arithmetic questions; calculator / answer",
    )
    register(
        "toolgym/Search-v0",
        "toolgym.envs.search:SearchEnv",
        description="multi-hop questions over a corpus; search / open / answer tool calls",
    )
    register(
        "toolgym/SearchR1-v0",
        "toolgym.envs.search:SearchR1Env",
        description="multi-hop questions over a corpus; Search-R1's <search> / <answer> tags",
    )
    register(
        "toolgym/ProposeSearch-v0",
        "toolgym.envs.search:ProposeSearchEnv",
        description="self-play proposer: given an answer, search and write its question",
    )
    register(
        "toolgym/Code-v0",
        "toolgym.envs.code:CodeEnv",
        description="HumanEval (or your JSONL tasks); run_python / submit, hidden tests",
    )
    register(
        "toolgym/MathCode-v0",
        "toolgym.envs.code:MathCodeEnv",
        description="arithmetic word problems; <python> runs code, <answer> ends",
    )
    register(
        "toolgym/CodeReason-v0",
        "toolgym.envs.code:CodeReasonEnv",
        description="predict a program's output or input, or write it from examples; <answer>",
    )
    register(
        "toolgym/ProposeCode-v0",
        "toolgym.envs.code:ProposeCodeEnv",
        description="self-play proposer: write a program and inputs; the sandbox runs them",
    )
    register(
        "toolgym/SQL-v0",
        "toolgym.envs.sql:SQLEnv",
        description="questions over read-only databases; run_sql / describe_table / submit",
    )
    register(
        "toolgym/ProposeSQL-v0",
        "toolgym.envs.sql:ProposeSQLEnv",
        description="self-play proposer: explore a database, write a question and its query",
    )
    register(
        "toolgym/Web-v0",
        "toolgym.envs.gui.web:WebEnv",
        description="any web app: tasks with a start URL, an instruction and a success check",
    )
    for task in task_names():  # the pages the installed miniwob package ships
        register(
            f"toolgym/miniwob.{task}-v0",
            "toolgym.envs.gui.miniwob:MiniWoBEnv",
            {"task": task},
            description=f"MiniWoB++ {task} in headless Chromium; click / type / press / ...",
            nondeterministic=task in NONDETERMINISTIC,
        )
