"""The example agent (arithmetic_openai.py) as a command, either way: as a long-lived worker
(`harness.worker: true`) it serves episode after episode by toolgym's line protocol (a JSON
line in: the task, the session's base_url and api_key; a JSON line out: the result), so
Python and the openai client load once per worker; run once per episode instead, it reads
TOOLGYM_TASK, OPENAI_BASE_URL and OPENAI_API_KEY and prints its result.

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[python,examples/agents/arithmetic_worker.py]' harness.worker=true
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from types import SimpleNamespace

from arithmetic_openai import solve


def main() -> None:
    if "TOOLGYM_TASK" in os.environ:  # one episode, its session in the environment
        task = SimpleNamespace(**json.loads(os.environ["TOOLGYM_TASK"]))
        print(asyncio.run(solve(task, os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"])))
        return
    for line in sys.stdin:  # one episode a line; the loop ends when toolgym closes the input
        request = json.loads(line)
        task = SimpleNamespace(**request["task"])
        try:
            result = asyncio.run(solve(task, request["base_url"], request["api_key"]))
            answer = {"result": result}
        except Exception as exc:  # reported, and judged as a failed command would be
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
