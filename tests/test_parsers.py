"""Action parsers: well-formed calls come out; each kind of malformed input gets a precise,
readable complaint instead of an exception."""

from __future__ import annotations

import pytest

from toolgym.errors import ConfigError
from toolgym.tools import FencedCodeParser, HermesParser, ToolCall, XmlTagParser, make_parser


def test_hermes_reads_several_calls_and_keeps_the_prose():
    text = (
        "Let me look.\n"
        '<tool_call>\n{"name": "move", "arguments": {"direction": "north"}}\n</tool_call>\n'
        '<tool_call>{"name": "pick_up", "arguments": {}}</tool_call> done'
    )
    parsed = HermesParser().parse(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("move", {"direction": "north"}),
        ("pick_up", {}),
    ]
    assert parsed.errors == []
    assert parsed.text == "Let me look.\n\n done"


def test_hermes_invalid_json_names_the_position():
    parsed = HermesParser().parse(
        '<tool_call>{"name": "move", "arguments": {"direction": "north",}}</tool_call>'
    )
    assert parsed.calls == []
    assert parsed.errors == [
        "tool call 1 is not valid JSON: Expecting property name enclosed in double quotes at line 1, "
        'column 53 (char 52), near: \'ve", "arguments": {"direction": "north",}}\'.'
    ]


def test_hermes_a_number_too_long_to_read_is_a_mistake_not_a_crash():
    digits = "1" * 5000
    parsed = HermesParser().parse(
        f'<tool_call>{{"name": "a", "arguments": {{"x": {digits}}}}}</tool_call>'
        f'<tool_call>{{"name": "b", "arguments": "{{\\"x\\": {digits}}}"}}</tool_call>'
        '<tool_call>{"name": "c", "arguments": {}}</tool_call>'
    )
    assert [c.name for c in parsed.calls] == ["c"]
    assert parsed.errors[0].startswith("tool call 1 cannot be read: Exceeds the limit")
    assert parsed.errors[1].startswith('tool call 2: "arguments" cannot be read: Exceeds')
    assert all(len(e) < 300 for e in parsed.errors)


def test_hermes_reports_each_bad_call_and_keeps_the_good_ones():
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
        "<tool_call>[1, 2]</tool_call>"
        '<tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": [1]}</tool_call>'
        "<tool_call></tool_call>"
    )
    parsed = HermesParser().parse(text)
    assert [c.name for c in parsed.calls] == ["a"]
    assert parsed.errors[0].startswith("tool call 2 must be a JSON object like <tool_call>")
    assert parsed.errors[0].endswith("not a list.")
    assert parsed.errors[1].startswith('tool call 3 has no "name" string')
    assert parsed.errors[2] == 'tool call 4: "arguments" must be a JSON object, not a list.'
    assert parsed.errors[3].startswith("tool call 5 is empty")


def test_hermes_unclosed_call_and_double_encoded_arguments():
    assert HermesParser().parse('<tool_call>{"name": "a"}').errors == [
        "tool call 1 is not closed: end it with </tool_call>."
    ]
    parsed = HermesParser().parse(
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
    )
    assert parsed.calls[0].arguments == {"x": 1}
    llama = HermesParser().parse('<tool_call>{"name": "a", "parameters": {"x": 2}}</tool_call>')
    assert llama.calls[0].arguments == {"x": 2}


def test_hermes_render_round_trips():
    calls = [ToolCall("move", {"direction": "north"}), ToolCall("say", {"text": "héllo </b>"})]
    parsed = HermesParser().parse(HermesParser().render(calls))
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in calls]


def test_xml_tags_map_to_tools_and_ignore_other_tags():
    parser = XmlTagParser({"search": ("search", "query"), "answer": ("answer", "answer")})
    parsed = parser.parse("<think>hmm</think><search> capital of France </search>")
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("search", {"query": "capital of France"})
    ]
    assert parsed.text == "<think>hmm</think>"
    assert parser.parse("<answer>Paris").errors == [
        "<answer> is not closed: write <answer>...</answer>."
    ]
    assert parser.parse(parser.render([ToolCall("answer", {"answer": "Paris"})])).calls[
        0
    ].arguments == {"answer": "Paris"}


def test_fenced_code_blocks_become_calls():
    parser = FencedCodeParser({"python": ("python", "code"), "sql": ("sql", "query")})
    parsed = parser.parse("Run this:\n```python\nprint(1)\n```\nand\n```sql\nSELECT 1\n```\n")
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("python", {"code": "print(1)"}),
        ("sql", {"query": "SELECT 1"}),
    ]
    assert parsed.text == "Run this:\n\nand"


def test_fenced_code_complaints():
    parser = FencedCodeParser()
    assert parser.parse("```python\nprint(1)\n").errors == [
        "code block opened with ```python is not closed: end it with a line ```."
    ]
    assert parser.parse("```bash\nls\n```").errors == [
        "code blocks in 'bash' cannot be run here; use ```python."
    ]
    assert parser.parse("```\nx = 1\n```").calls[0].arguments == {"code": "x = 1"}


def test_make_parser_by_name_with_hint():
    assert isinstance(make_parser("xml"), XmlTagParser)
    with pytest.raises(ConfigError, match="unknown action parser 'hermse'. Did you mean: hermes?"):
        make_parser("hermse")
