"""Running the shell blocks of the README and the guide as a user would: the whole block in
one bash that stops at the first failing command; a command that ends in `&` is a server,
waited for until its `/health` answers; the servers stop when the block ends."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

PRELUDE = r"""PS4='+ ${EPOCHREALTIME%.*} '  # each command traced with the second it started
set -euo pipefail -x
trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT
answers() {  # PORT PID: until http://127.0.0.1:PORT/health answers, while PID runs
  local -; set +x
  for _ in $(seq 600); do
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=1)" \
      2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { echo "the server for port $1 exited" >&2; return 1; }
    sleep 0.2
  done
  echo "nothing answered on port $1 in 120 s" >&2; return 1
}
"""


def as_script(block: str) -> str:
    """The block with a wait after each server it starts."""
    lines, command = [], ""
    for line in block.splitlines():
        lines.append(line)
        code = re.sub(r"\s+#.*$", "", line).rstrip()
        command += " " + code.rstrip("\\")
        if code.endswith("\\"):
            continue
        if command.endswith("&") and not command.endswith("&&"):
            port = re.search(r"--port (\d+)", command)
            assert port, f"a server the block starts needs --port to be waited for: {command}"
            lines.append(f"answers {port.group(1)} $!")
        command = ""
    return PRELUDE + "\n".join(lines) + "\n"


def user_env(bin_dir: Path) -> dict[str, str]:
    """A user's shell with `bin_dir` (its `toolgym` and `python`) first on PATH, wide lines,
    and none of the test run's own import path."""
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def run_block(
    block: str, cwd: Path, env: dict[str, str], stdin: str = "", then: str = "",
    timeout: float = 900,
) -> str:  # fmt: skip
    """The block's output, run in `cwd`; `then`: more shell run before the servers stop."""
    result = subprocess.run(
        ["bash", "-c", as_script(block) + then], cwd=cwd, env=env, input=stdin,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-4000:]}"
    return result.stdout
