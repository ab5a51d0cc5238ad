"""The example agent (arithmetic_openai.py) as a command, either way: as a long-lived worker
(`harness.worker: true`) it serves episode after episode by toolgym's line protocol (a JSON
line in: the task, the session's base_url and api_key; a JSON line out: the result), so
Python and the openai client load once per worker; run once per episode instead, it reads
TOOLGYM_TASK, OPENAI_BASE_URL and OPENAI_API_KEY and prints its result. The protocol's loop
is `serve` in arithmetic_tools.py.

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[python,examples/agents/arithmetic_worker.py]' harness.worker=true
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from arithmetic_openai import solve
from arithmetic_tools import serve


def play(task: dict, base_url: str, api_key: str) -> str | None:
    return asyncio.run(solve(SimpleNamespace(**task), base_url, api_key))


if __name__ == "__main__":
    serve(play)
