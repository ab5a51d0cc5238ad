"""Key-value recall: records listed across a long context, then questions whose answers are
fields of one record, so a reader must find the key far back and copy what follows it."""

from __future__ import annotations

import json

from toolgym.agents.models.corpus.strings import Strings


def document(strings: Strings, chars: int) -> str:
    rng = strings.rng
    fields = list(dict.fromkeys(strings.field() for _ in range(rng.randint(2, 5))))
    key_field = fields[0]
    records: list[dict[str, str]] = []
    lines: list[str] = []
    style = rng.randrange(3)
    size = 0
    while size < chars * 0.7 or not records:
        record = {f: strings.value().strip('"') for f in fields}
        records.append(record)
        if style == 0:
            line = json.dumps(record)
        elif style == 1:
            line = " | ".join(f"{f}: {v}" for f, v in record.items())
        else:
            line = f"{record[key_field]} = " + ", ".join(
                f"{f} {v}" for f, v in list(record.items())[1:]
            )
        lines.append(line)
        size += len(line) + 1
    while size < chars:
        record = rng.choice(records)
        wanted = rng.choice(fields[1:]) if len(fields) > 1 else key_field
        question = rng.choice(
            (
                f"Q: {wanted} of {record[key_field]}?\nA: {record[wanted]}",
                f"The {wanted} of {key_field} {record[key_field]} is {record[wanted]}.",
                f'lookup("{record[key_field]}").{wanted} == "{record[wanted]}"',
            )
        )
        lines.append(question)
        size += len(question) + 1
    return "\n".join(lines)
