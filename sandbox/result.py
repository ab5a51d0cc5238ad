"""What a sandboxed run is given and what it gives back."""

from __future__ import annotations

import base64
import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from toolgym.errors import ConfigError, ToolgymError

LANGUAGES = ("python", "bash")


class SandboxError(ToolgymError, RuntimeError):
    """The sandbox itself failed (a backend missing or broken, a pool shut down, a sandbox
    that died under us): an infrastructure error, never the code's result."""


class Status(enum.StrEnum):
    OK = "ok"
    """exit code 0."""
    ERROR = "error"
    """a non-zero exit (an exception, a failed command, a killing signal)."""
    TIMEOUT = "timeout"
    """past its wall-clock limit: stopped, with the output so far."""
    MEMORY = "memory"
    """past its memory limit."""
    OUTPUT_LIMIT = "output_limit"
    """wrote more than the output cap (the rest was dropped)."""


@dataclass(frozen=True)
class Limits:
    """Per-call bounds. Memory is the address-space limit of the code's process."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    processes: int = 64
    file_mb: int = 16
    open_files: int = 256
    output_bytes: int = 64 * 1024
    """Kept of stdout and of stderr each; past it the text ends with a marker."""
    fetch_bytes: int = 1 << 20
    """The largest file a call may fetch back."""
    work_mb: int = 64
    """Size of each place a call may write: the work dir, /tmp and /dev/shm (each a tmpfs,
    emptied after every call)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not value > 0:
                raise ConfigError(f"sandbox limit {name}={value!r}: it must be positive")

    def override(self, timeout_s: float | None, memory_mb: int | None) -> Limits:
        """These limits with a call's own timeout and memory, each at most the pool's."""
        changed = dict(asdict(self))
        if timeout_s is not None:
            changed["timeout_s"] = min(float(timeout_s), self.timeout_s)
        if memory_mb is not None:
            changed["memory_mb"] = min(int(memory_mb), self.memory_mb)
        return Limits(**changed)

    def guest(self) -> dict[str, Any]:
        """The rlimits the guest program sets."""
        return {
            "memory_mb": self.memory_mb,
            "processes": self.processes,
            "file_mb": self.file_mb,
            "open_files": self.open_files,
        }


@dataclass
class RunResult:
    """The outcome of running code. stdout/stderr are text, each capped with a marker."""

    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    files: dict[str, bytes | None] = field(default_factory=dict)
    """Fetched files by name; None for one missing, a link, or over the fetch limit."""
    signal: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def observation(self, limit: int = 4000) -> str:
        """The result as the model reads it: output, then errors, then what stopped it."""
        parts = [self.stdout.rstrip("\n")] if self.stdout.strip() else []
        if self.stderr.strip():
            parts.append(self.stderr.rstrip("\n"))
        if self.status is Status.TIMEOUT:
            parts.append(f"[stopped: ran past its time limit of {self.duration_s:.0f} s]")
        elif self.status is Status.MEMORY:
            parts.append("[stopped: ran out of memory]")
        elif self.status is Status.ERROR and not self.stderr.strip():
            parts.append(f"[exit code {self.exit_code}]")
        text = "\n".join(parts) or "[no output]"
        if len(text) > limit:
            half = limit // 2
            text = f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"
        return text

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> RunResult:
        if "setup_error" in reply:
            return cls(Status.ERROR, None, "", f"sandbox: {reply['setup_error']}", 0.0)
        files = {
            name: None if data is None else base64.b64decode(data)
            for name, data in (reply.get("files") or {}).items()
        }
        return cls(
            status=Status(reply["status"]),
            exit_code=reply.get("exit_code"),
            stdout=reply.get("stdout", ""),
            stderr=reply.get("stderr", ""),
            duration_s=float(reply.get("duration", 0.0)),
            files=files,
            signal=reply.get("signal"),
        )


def check_file_name(name: str) -> str:
    """A file name must stay inside the work dir: relative, without '..' or empty parts."""
    parts = name.split("/") if isinstance(name, str) else [""]
    if not name or name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(
            f"file name {str(name)[:200]!r}: give a relative path inside the work dir "
            "(no leading '/', no '..')"
        )
    return name


def check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ConfigError(f"language {language!r}: choose one of {', '.join(LANGUAGES)}")
    return language


def b64(data: str | bytes) -> str:
    """Text or bytes as base64 text, for frames and SandboxFusion's files."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return base64.b64encode(raw).decode()
