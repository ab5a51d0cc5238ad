"""Hermes / Qwen format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any
number per turn. This is what the Qwen2.5/Qwen3 chat templates teach their models."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from toolgym.tools.parsers.base import ActionParser, ParsedAction
from toolgym.tools.records import ToolCall

_SNIPPET = 40


class HermesParser(ActionParser):
    def __init__(self, open_tag: str = "<tool_call>", close_tag: str = "</tool_call>") -> None:
        self.open_tag, self.close_tag = open_tag, close_tag
        self._block = re.compile(
            re.escape(open_tag) + r"(.*?)(?:" + re.escape(close_tag) + r"|$)", re.S
        )

    def parse(self, text: str) -> ParsedAction:
        out = ParsedAction()
        prose: list[str] = []
        cursor = 0
        for index, match in enumerate(self._block.finditer(text), start=1):
            prose.append(text[cursor : match.start()])
            cursor = match.end()
            if not match.group(0).endswith(self.close_tag):
                out.errors.append(f"tool call {index} is not closed: end it with {self.close_tag}.")
                continue
            call, error = self._read_call(match.group(1), index)
            if call is not None:
                out.calls.append(call)
            if error:
                out.errors.append(error)
        prose.append(text[cursor:])
        out.text = "".join(prose).replace(self.close_tag, "").strip()
        return out

    def _read_call(self, body: str, index: int) -> tuple[ToolCall | None, str | None]:
        where = f"tool call {index}"
        body = body.strip()
        if not body:
            return None, f"{where} is empty: write {self.example()}."
        try:
            data = json.loads(body)
        except RecursionError:
            return None, f"{where} is nested too deeply to read; write flat JSON."
        except json.JSONDecodeError as exc:
            near = body[max(0, exc.pos - _SNIPPET) : exc.pos + _SNIPPET // 2]
            return None, (
                f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} "
                f"(char {exc.pos}), near: {near!r}."
            )
        except ValueError as exc:  # e.g. an integer of more digits than Python will read
            return None, f"{where} cannot be read: {str(exc).split(';')[0][:200]}."
        if not isinstance(data, dict):
            return (
                None,
                f"{where} must be a JSON object like {self.example()}, not a {_json_type(data)}.",
            )
        name = data.get("name")
        if not isinstance(name, str) or not name:
            return None, f'{where} has no "name" string: write {self.example()}.'
        arguments = data.get("arguments", data.get("parameters", {}))
        if isinstance(arguments, str):  # some models double-encode the arguments
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except RecursionError:
                return None, f'{where}: "arguments" is nested too deeply to read.'
            except json.JSONDecodeError as exc:
                return (
                    None,
                    f'{where}: "arguments" is a string that is not valid JSON ({exc.msg} at char {exc.pos}).',
                )
            except ValueError as exc:
                return None, f'{where}: "arguments" cannot be read: {str(exc).split(";")[0][:200]}.'
        if not isinstance(arguments, dict):
            return (
                None,
                f'{where}: "arguments" must be a JSON object, not a {_json_type(arguments)}.',
            )
        return ToolCall(name, arguments), None

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            f"{self.open_tag}\n{json.dumps({'name': c.name, 'arguments': c.arguments}, ensure_ascii=False)}\n{self.close_tag}"
            for c in calls
        )

    def example(self) -> str:
        return f'{self.open_tag}{{"name": "<tool name>", "arguments": {{...}}}}{self.close_tag}'

    def format_hint(self) -> str:
        return f"Call a tool by writing {self.example()}."


def _json_type(value: Any) -> str:
    names = {
        list: "list",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)
