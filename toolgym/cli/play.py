"""`toolgym play`: a person plays an episode by typing tool calls.

A line is either raw model text (e.g. `<tool_call>{...}</tool_call>`, sent as is) or a
shorthand `tool arg=value ...` / `tool value ...` that is written out in the env's own call
format. `:solve` shows the scripted solver's move, `:quit` ends.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from toolgym.cli.options import EnvArgs
from toolgym.cli.show import console, show_message, show_tools
from toolgym.tools.records import ToolCall

COMMANDS = "Commands: :solve (show the solver's move), :help, :quit."


def help_line(schemas: list[dict[str, Any]], parser: Any) -> str:
    """How to type a call, shown with this env's own first tool and call format."""
    if not schemas:
        return f"Type the model's text. {COMMANDS}"
    function = schemas[0]["function"]
    name, params = function["name"], list(function.get("parameters", {}).get("properties", {}))
    if not params:
        shorthand, call = f"`{name}`", ToolCall(name, {})
    else:
        shorthand = f"`{name} VALUE`, `{name} {params[0]}=VALUE`"
        call = ToolCall(name, {params[0]: "VALUE"})
    raw = f", or raw text such as {parser.render([call])}" if parser is not None else ""
    return f"Type a tool call: {shorthand}{raw}. {COMMANDS}"


def play_command(
    env_id: str, seed: int, screenshot: Path | None = None, kwargs: dict[str, Any] | None = None
) -> int:
    from toolgym.envs.registration import make

    env = make(env_id, **(kwargs or {}))
    try:
        if screenshot is not None and not hasattr(env.unwrapped, "save_screenshot"):
            console.print(
                f"[red]{escape(env_id)} shows no page: --screenshot is for browser envs.[/]"
            )
            return 2
        return _play(env, seed, screenshot)
    finally:
        env.close()


def _snap(env: Any, screenshot: Path | None) -> None:
    if screenshot is not None:
        env.unwrapped.save_screenshot(screenshot)
        console.print(f"[dim]page: {escape(str(screenshot))}[/]")


def _play(env: Any, seed: int, screenshot: Path | None = None) -> int:
    messages, info = env.reset(seed=seed)
    _snap(env, screenshot)
    schemas = info.get("tools") or []
    if schemas:
        show_tools(schemas)
    for m in messages:
        show_message(m)
    parser = getattr(env.unwrapped, "parser", None)
    help_text = help_line(schemas, parser)
    console.print(f"[dim]{escape(help_text)}[/]")
    total, turns = 0.0, 0
    while True:
        try:
            line = input("action> ").strip()
        except EOFError:
            console.print("\n[dim]input ended; episode abandoned.[/]")
            return 0
        if not line:
            continue
        if line in (":quit", ":q"):
            return 0
        if line == ":help":
            console.print(escape(help_text))
            continue
        if line == ":solve":
            console.print(f"solver: {escape(str(env.unwrapped.scripted_action()))}")
            continue
        action = to_action(line, schemas, parser)
        show_message({"role": "assistant", "content": action})
        obs, reward, terminated, truncated, info = env.step(action)
        turns += 1
        total += reward
        for m in obs:
            show_message(m)
        if not (terminated or truncated):
            _snap(env, screenshot)
        status = "valid" if info["valid_action"] else "[red]invalid[/]"
        if any(c.get("error") == "exception" for c in info.get("tool_calls", [])):
            status += " · [red]a tool raised (a bug in the env, not the action)[/]"
        console.print(
            f"reward {reward:g} · return {total:g} · action {status} · state {escape(str(info['state_key']))}"
        )
        if terminated or truncated:
            end = "terminated" if terminated else "truncated"
            console.print(f"[bold]Episode over ({end}) after {turns} turn(s), return {total:g}.[/]")
            return 0


def to_action(line: str, schemas: list[dict[str, Any]], parser: Any) -> str:
    """Expand the `tool arg=value` shorthand into the env's call format; else return `line`."""
    call = parse_shorthand(line, schemas)
    return parser.render([call]) if call is not None and parser is not None else line


def parse_shorthand(line: str, schemas: list[dict[str, Any]]) -> ToolCall | None:
    """`tool value ...` or `tool name=value ...` as a call, read by the tool's own schema:
    words fill its required parameters in order (all of them, in order, when it requires
    none), a text parameter taking every word the later ones do not need (`command take
    brass key`, `search capital of france`); optional ones are given by name. Each value is
    read as its parameter's type: a string stays text (`5.08` and `true` are not a number and
    a boolean there). None when the first word names no tool, words are left over, or the
    line does not split into words."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    tools = {s["function"]["name"]: s["function"].get("parameters") or {} for s in schemas}
    if not words or words[0] not in tools:
        return None
    properties: dict[str, Any] = tools[words[0]].get("properties") or {}
    arguments: dict[str, Any] = {}
    positional: list[str] = []
    for word in words[1:]:
        key, sep, raw = word.partition("=")
        if sep and key in properties and key not in arguments:
            arguments[key] = _typed(raw, properties[key])
        else:
            positional.append(word)
    schema = tools[words[0]]
    required = [p for p in schema.get("required") or [] if p in properties and p not in arguments]
    order = required or [name for name in properties if name not in arguments]
    for index, name in enumerate(order):
        if not positional:
            break
        after = len(order) - index - 1  # one word kept for each parameter still to fill
        take = max(1, len(positional) - after) if _types(properties[name]) <= {"string"} else 1
        arguments[name] = _typed(" ".join(positional[:take]), properties[name])
        positional = positional[take:]
    if positional:  # words left and no parameter to take them: the env says what is wrong
        return None
    return ToolCall(words[0], arguments)


def _typed(raw: str, schema: Any) -> Any:
    """`raw` as the JSON type `schema` declares; text when it declares a string (or a value
    that does not read as the declared type: the env's own check then says so)."""
    kinds = _types(schema)
    if "string" in kinds and len(kinds) == 1:
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    if (
        kinds
        and _json_type(value) not in kinds
        and not ("number" in kinds and _json_type(value) == "integer")
    ):
        return raw
    return value


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    found: set[str] = set()
    for option in schema.get("anyOf") or schema.get("oneOf") or []:
        found |= _types(option)
    return found


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def play(
    env_id: Annotated[str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0")],
    seed: Annotated[
        int, typer.Option(help="Episode seed (the same seed gives the same task).")
    ] = 0,
    screenshot: Annotated[
        Path | None,
        typer.Option(help="Browser envs: keep a PNG of the page here, redrawn after every turn."),
    ] = None,
    env_arg: EnvArgs = None,
) -> None:
    """Play an episode in the terminal by typing tool calls."""
    from toolgym.cli.train import env_kwargs

    raise typer.Exit(
        play_command(
            env_id=env_id, seed=seed, screenshot=screenshot, kwargs=env_kwargs(env_arg or [])
        )
    )
