"""The same agent as arithmetic_openai.py, written with LangGraph: a model node (LangChain's
ChatOpenAI with the calculator bound as a tool) and a tool node, looping until the model
answers without a tool call. Trained through the gateway, only the base_url and key change.

    toolgym train --config configs/harness_arithmetic.yaml \\
        harness.agent=examples/agents/arithmetic_langgraph.py:solve
"""

from __future__ import annotations

from typing import Any

from arithmetic_tools import SYSTEM
from arithmetic_tools import calculator as evaluate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


async def solve(task: Any, base_url: str, api_key: str) -> str:
    """Answer `task.prompt`; the answer is the model's last message."""
    model = ChatOpenAI(
        model="policy", base_url=base_url, api_key=api_key, max_tokens=48, max_retries=0
    ).bind_tools([calculator])

    async def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", think)
    graph.add_node("tools", ToolNode([calculator]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    # the gateway's call budget ends a model that never stops calling tools
    state = await graph.compile().ainvoke(
        {"messages": [("system", SYSTEM), ("user", task.prompt)]}, {"recursion_limit": 64}
    )
    return str(state["messages"][-1].content)
