"""@tool: schemas from signatures, hidden arguments, validation, timeouts, failures as text."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from toolgym.errors import ToolDefinitionError
from toolgym.tools import InfraError, Injected, ToolCall, ToolErrorKind, ToolSet, tool


@tool
async def search(query: str, k: int = 3, mode: Literal["fast", "exact"] = "fast") -> str:
    """Search the corpus for documents.

    Args:
        query: what to look for.
        k: how many documents to return,
            at most ten.
        mode: fast or exact matching.
    """
    return f"{query}|{k}|{mode}"


class Handle:
    def __init__(self) -> None:
        self.calls = 0


@tool
async def bump(amount: int, handle: Injected[Handle]) -> int:
    """Add to the handle's counter."""
    handle.calls += amount
    return handle.calls


def call(t, **arguments):
    return asyncio.run(t.call(ToolCall(t.name, arguments, id="c1"), {"handle": Handle()}))


def test_schema_comes_from_signature_and_docstring():
    fn = search.schema()["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the corpus for documents."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string", "description": "what to look for."}
    assert params["properties"]["k"]["type"] == "integer"
    assert params["properties"]["k"]["default"] == 3
    assert params["properties"]["k"]["description"] == "how many documents to return, at most ten."
    assert params["properties"]["mode"]["enum"] == ["fast", "exact"]
    assert "title" not in params["properties"]["query"]


def test_injected_arguments_are_hidden_from_the_schema_and_filled_by_the_caller():
    params = bump.schema()["function"]["parameters"]
    assert list(params["properties"]) == ["amount"]
    handle = Handle()
    result = asyncio.run(bump.call(ToolCall("bump", {"amount": 2}), {"handle": handle}))
    assert result.ok and result.content == "2" and handle.calls == 2


def test_the_model_cannot_forge_an_injected_argument():
    result = asyncio.run(
        bump.call(ToolCall("bump", {"amount": 1, "handle": "evil"}), {"handle": Handle()})
    )
    assert result.error is ToolErrorKind.INVALID_ARGUMENTS
    assert "unexpected argument 'handle'" in result.content
    assert "allowed: amount" in result.content


def test_missing_and_mistyped_arguments_say_what_the_schema_expects():
    missing = call(search)
    assert missing.error is ToolErrorKind.INVALID_ARGUMENTS
    assert "missing required argument 'query' (expected string)" in missing.content
    wrong = call(search, query="x", k="many")
    assert "argument 'k': expected integer, got \"many\"" in wrong.content
    enum = call(search, query="x", mode="slow")
    assert 'expected one of "fast", "exact", got "slow"' in enum.content


def test_valid_call_runs_with_defaults_and_coercion():
    assert call(search, query="cats").content == "cats|3|fast"
    assert call(search, query="cats", k="5").content == "cats|5|fast"


def test_exceptions_and_timeouts_become_observations():
    @tool(timeout_s=0.05)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(10)
        return "late"

    @tool
    async def broken(x: int) -> str:
        """Always fails."""
        raise ValueError(f"bad x {x}")

    timed_out = call(slow)
    assert timed_out.error is ToolErrorKind.TIMEOUT
    assert timed_out.content == "Error: tool 'slow' timed out after 0.05 s."
    failed = call(broken, x=4)
    assert failed.error is ToolErrorKind.EXCEPTION
    assert failed.content == "Error: tool 'broken' failed: ValueError: bad x 4"


def test_infra_errors_are_marked_as_not_the_models_fault():
    @tool
    async def down() -> str:
        """A service that is down."""
        raise InfraError("search server unreachable")

    result = call(down)
    assert result.error is ToolErrorKind.INFRA
    assert "unreachable" in result.content


def test_oversized_output_is_truncated_with_a_note():
    @tool(max_output_chars=10)
    async def big() -> str:
        """Returns a lot."""
        return "x" * 25

    result = call(big)
    assert result.content == "x" * 10 + "\n[output truncated: 15 more characters]"


def test_non_string_results_are_json():
    @tool
    def pair(a: int, b: int) -> dict:
        """A sync tool returning a dict."""
        return {"sum": a + b}

    assert call(pair, a=1, b=2).content == '{"sum": 3}'


def test_tool_without_type_hints_is_refused_in_plain_words():
    with pytest.raises(
        ToolDefinitionError, match=r"argument 'direction' has no type hint.*direction: str"
    ):

        @tool
        async def move(direction):
            """Move."""


def test_tool_without_docstring_or_with_varargs_is_refused():
    with pytest.raises(ToolDefinitionError, match="no docstring"):

        @tool
        async def nodoc(x: int) -> int:
            return x

    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool
        async def many(*args: int) -> int:
            """Sum."""
            return sum(args)


def test_methods_become_tools_bound_to_their_instance():
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        @tool
        async def add(self, k: int) -> int:
            """Add k."""
            self.n += k
            return self.n

    a, b = Counter(), Counter()
    assert "self" not in str(a.add.schema())
    asyncio.run(a.add.call(ToolCall("add", {"k": 2})))
    assert (a.n, b.n) == (2, 0)


def test_toolset_routes_and_suggests_close_names_for_unknown_tools():
    tools = ToolSet([search, bump])
    assert tools.names == ["search", "bump"]
    assert [s["function"]["name"] for s in tools.schemas()] == ["search", "bump"]
    result = asyncio.run(tools.call(ToolCall("serach", {"query": "x"})))
    assert result.error is ToolErrorKind.UNKNOWN_TOOL
    assert result.content == "Error: unknown tool 'serach'. Did you mean: search?"
    far = asyncio.run(tools.call(ToolCall("zzz", {})))
    assert far.content == "Error: unknown tool 'zzz'. Available tools: search, bump."
    with pytest.raises(ToolDefinitionError, match="two tools are named 'search'"):
        ToolSet([search, search])
