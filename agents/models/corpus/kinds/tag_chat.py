"""Search-R1's tag format: the assistant thinks, searches a name it copies from the question,
reads numbered documents inside <information>, and copies the answer into <answer>."""

from __future__ import annotations

from toolgym.agents.models.corpus.chat import Message, conversations, render
from toolgym.agents.models.corpus.strings import Strings

_INSTRUCTIONS = (
    "Answer the question. Think inside <think> and </think>. To look something up, write "
    "<search> your query </search>; results come back between <information> and "
    "</information>. Write the answer alone inside <answer> and </answer>."
)


def document(strings: Strings, chars: int) -> str:
    return conversations(strings, chars, conversation)


def conversation(strings: Strings) -> str:
    rng = strings.rng
    subject, relation, target = strings.name(), strings.word(), strings.value().strip('"')
    docs = [f"{subject} {relation} {target}. {strings.sentence()}"]
    docs += [
        f"{strings.name()} {relation} {strings.value()}. {strings.sentence()}"
        for _ in range(rng.randint(0, 3))
    ]
    rng.shuffle(docs)
    information = "\n".join(
        f"Doc {i} (Title: {d.split('.')[0][:40]}) {d}" for i, d in enumerate(docs, 1)
    )
    messages: list[Message] = [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"Question: What does {subject} {relation}?"},
        {
            "role": "assistant",
            "content": f"<think> I need to find {subject}. </think>\n<search> {subject} </search>",
        },
        {"role": "tool", "name": "search", "content": f"<information>{information}</information>"},
        {
            "role": "assistant",
            "content": f"<think> {subject} {relation} {target}. </think>\n<answer> {target} </answer>",
        },
    ]
    return render(messages)
