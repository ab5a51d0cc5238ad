"""`toolgym play`: a person plays an episode by typing tool calls.

A line is either raw model text (e.g. `<tool_call>{...}</tool_call>`, sent as is) or a
shorthand `tool arg=value ...` / `tool value ...` that is written out in the env's own call
format. `:solve` shows the scripted solver's move, `:quit` ends.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rich.markup import escape

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
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    tools = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    if not words or words[0] not in tools:
        return None
    params = list(tools[words[0]].get("properties", {}))
    arguments: dict[str, Any] = {}
    positional = iter(p for p in params)
    for word in words[1:]:
        key, sep, raw = word.partition("=")
        if not (sep and key in params):
            key, raw = next(positional, f"arg{len(arguments)}"), word
        while key in arguments:
            key = next(positional, f"arg{len(arguments)}")
        arguments[key] = _value(raw)
    return ToolCall(words[0], arguments)


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
