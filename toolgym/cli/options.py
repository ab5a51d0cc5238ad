"""Options several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

EnvArgs = Annotated[list[str] | None, typer.Option(help="Env argument name=value (repeatable).")]
Plays = Annotated[
    int,
    typer.Option(
        min=1,
        max=64,
        help="Episodes of each task (with --temperature above 0): the success interval stays "
        "one over tasks, narrowed only by what the repeats add.",
    ),
]
ToolSchemas = Annotated[
    bool | None,
    typer.Option(
        "--tool-schemas/--no-tool-schemas",
        help="Render tool JSON schemas into prompts (default: as the model was fine-tuned by "
        "`toolgym sft`, else yes).",
    ),
]
AgentPath = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="Your agent plays each episode against the policy, through the gateway: "
        "path/to/file.py:function or package.module:function.",
    ),
]
AgentCommand = Annotated[
    str | None,
    typer.Option(
        "--command",
        help="Or your agent as a command line, run once per episode (it reads "
        "OPENAI_BASE_URL, OPENAI_API_KEY and TOOLGYM_TASK, and prints its answer).",
    ),
]
AgentWorker = Annotated[
    bool,
    typer.Option(
        "--worker",
        help="Run the --command as long-lived workers that serve episode after episode by the "
        "line protocol (docs/existing-agents.md), not once per episode.",
    ),
]
AnswerCheck = Annotated[
    str,
    typer.Option(
        help="How an agent's answer is checked: env (the env's answer tool), exact, contains, "
        "number or package.module:function."
    ),
]
AnswerTool = Annotated[
    str, typer.Option(help="The env's tool that checks an agent's answer (--answer-check env).")
]
