"""Logging set-up shared by the CLI and library code: library modules only call
`get_logger(__name__)`; the CLI decides once how records are shown (`--log-level`, or the
TOOLGYM_LOG variable)."""

from __future__ import annotations

import logging
import warnings

from rich.console import Console
from rich.logging import RichHandler

from toolgym.errors import ConfigError

_ROOT = "toolgym"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def get_logger(name: str) -> logging.Logger:
    """A logger under the `toolgym` hierarchy (silent until `setup_logging` runs)."""
    return logging.getLogger(name if name.startswith(_ROOT) else f"{_ROOT}.{name}")


def setup_logging(level: str | int = "INFO") -> None:
    """Show toolgym's log records on stderr through rich; safe to call more than once.
    Libraries' own chatter (transformers' progress bars and advice, its deprecation
    warnings) is kept down unless DEBUG is asked for."""
    if isinstance(level, str):
        if level.upper() not in LEVELS:
            raise ConfigError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
        level = level.upper()
    root = logging.getLogger(_ROOT)
    root.setLevel(level)
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = RichHandler(
            console=Console(stderr=True, emoji=False), show_path=False, rich_tracebacks=False
        )
        root.addHandler(handler)
    if root.level > logging.DEBUG:
        quiet_libraries()


def quiet_libraries() -> None:
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers(\..*)?")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"transformers(\..*)?")
