"""Sandboxes for model-written code: bubblewrap (the default on Linux) and Docker, warm pools
with a fork server inside each sandbox, stateful Python sessions, and a SandboxFusion-
compatible server (`toolgym serve sandbox`).

    async with SandboxPool("bubblewrap", size=4) as pool:
        result = await pool.run("print(6 * 7)")          # result.status, .stdout, ...
        async with pool.session() as session:             # variables persist between calls
            await session.run("x = 6")
            (await session.run("x * 7")).stdout            # '42\\n'

A backend that is missing or broken is an error, never a silent fallback; the unisolated
`local` backend runs only when asked for by name.
"""

from toolgym.sandbox.backends import BACKENDS, DEFAULT_BACKEND, Backend, make_backend
from toolgym.sandbox.pool import SandboxPool, run
from toolgym.sandbox.result import LANGUAGES, Limits, RunResult, SandboxError, Status
from toolgym.sandbox.session import Session

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "LANGUAGES",
    "Backend",
    "Limits",
    "RunResult",
    "SandboxError",
    "SandboxPool",
    "Session",
    "Status",
    "make_backend",
    "run",
]
