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
