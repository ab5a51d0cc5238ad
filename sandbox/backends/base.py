"""The interface every sandbox backend has: open a sandbox running the guest program.

A backend knows how to isolate; the pool (sandbox/pool.py) knows how to keep sandboxes warm,
recycle and bound them. `check` runs before anything starts, so a backend that is missing or
broken is a clear error at once, never a silent fallback to something weaker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal

from toolgym.sandbox.channel import Channel
from toolgym.sandbox.result import Limits

Mode = Literal["fork", "repl"]
GUEST_SOURCE = (Path(__file__).parent.parent / "guest.py").read_text()
"""The guest program, passed to the sandbox's interpreter as `-c` source."""
START_TIMEOUT_S = 30.0


class Backend(ABC):
    """Opens sandboxes of one kind."""

    name: str
    isolated: bool = True
    """False only for the local backend: it then cleans up by process group, not kill(-1)."""

    def check(self) -> None:  # noqa: B027  (a backend with nothing to check keeps this)
        """Raise SandboxError, saying what to install or fix, if this backend cannot run here."""

    @abstractmethod
    async def open(self, mode: Mode, limits: Limits) -> Channel:
        """Start one sandbox running the guest in `mode`, handshake done."""

    async def aclose(self) -> None:  # noqa: B027
        """Release what the backend itself holds (a client connection)."""

    def guest_limits(self, limits: Limits) -> dict[str, Any]:
        """The rlimits the guest sets on the code's process."""
        return limits.guest()

    def describe(self) -> dict[str, object]:
        return {"backend": self.name, "isolated": self.isolated}

    def guest_argv(self, python: str, mode: Mode) -> list[str]:
        flags = [mode, "contained"] if self.isolated else [mode]
        return [python, "-I", "-c", GUEST_SOURCE, *flags]
