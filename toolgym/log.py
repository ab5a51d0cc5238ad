"""Logging set-up shared by the CLI and library code: library modules only call
`get_logger(__name__)`; the CLI decides once how records are shown."""

from __future__ import annotations

import logging

from rich.logging import RichHandler

_ROOT = "toolgym"


def get_logger(name: str) -> logging.Logger:
    """A logger under the `toolgym` hierarchy (silent until `setup_logging` runs)."""
    return logging.getLogger(name if name.startswith(_ROOT) else f"{_ROOT}.{name}")


def setup_logging(level: str | int = "INFO") -> None:
    """Show toolgym's log records on stderr through rich; safe to call more than once."""
    root = logging.getLogger(_ROOT)
    root.setLevel(level)
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        root.addHandler(RichHandler(show_path=False, rich_tracebacks=False))
