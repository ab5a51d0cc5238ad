"""Tool-use conversations in the hermes format: a question names a key, the assistant copies it
into a lookup call (one hop, or a name-to-id hop then an id-to-record hop), reads the tool's
result among distractor records, and answers by copying the wanted field."""

from __future__ import annotations

import json
from typing import Any

from toolgym.agents.models.corpus.chat import (
    Message,
    conversations,
    render,
    schema,
    system_prompt,
    tool_call,
)
from toolgym.agents.models.corpus.strings import Strings


def document(strings: Strings, chars: int) -> str:
    return conversations(strings, chars, conversation)


def conversation(strings: Strings) -> str:
    rng = strings.rng
    fields = list(dict.fromkeys(strings.field() for _ in range(rng.randint(2, 4))))
    records = [
        {
            "name": strings.name(),
            "id": strings.ident(),
            **{f: strings.value().strip('"') for f in fields},
        }
        for _ in range(rng.randint(2, 6))
    ]
    record = rng.choice(records)
    wanted = rng.choice(fields)
    find, get, answer = strings.word(), strings.word(), rng.choice(("answer", "submit", "finish"))
    tools = [
        schema(find, "Find records by name.", {"name": "a name"}),
        schema(get, "Read one record by its id.", {"id": "a record id"}),
        schema(answer, "Give the final answer.", {"text": "the answer"}),
    ]
    question = rng.choice(
        (
            f"What is the {wanted} of {record['name']}?",
            f"Find the {wanted} for {record['name']}.",
            f"{record['name']}: {wanted}?",
        )
    )
    messages: list[Message] = [
        {"role": "system", "content": system_prompt("Answer the question with the tools.", tools)},
        {"role": "user", "content": question},
    ]
    two_hops = rng.random() < 0.5
    found = [r for r in records if r is record or rng.random() < 0.3]
    listing = [{"name": r["name"], "id": r["id"]} for r in found] if two_hops else found
    _call(messages, strings, find, {"name": record["name"]}, _lines(strings, listing))
    if two_hops:
        _call(messages, strings, get, {"id": record["id"]}, _lines(strings, [record]))
    if rng.random() < 0.7:
        messages.append(
            {"role": "assistant", "content": tool_call(strings, answer, {"text": record[wanted]})}
        )
        messages.append({"role": "tool", "name": answer, "content": "Your answer scored 1.00."})
    else:
        messages.append({"role": "assistant", "content": f"The {wanted} is {record[wanted]}."})
    return render(messages, tools if rng.random() < 0.3 else None)


def _call(
    messages: list[Message], strings: Strings, name: str, args: dict[str, Any], result: str
) -> None:
    messages.append({"role": "assistant", "content": tool_call(strings, name, args)})
    messages.append({"role": "tool", "name": name, "content": result})


def _lines(strings: Strings, records: list[dict[str, str]]) -> str:
    if strings.rng.random() < 0.5:
        return "\n".join(json.dumps(r) for r in records)
    return "\n".join(" | ".join(f"{k}: {v}" for k, v in r.items()) for r in records)
