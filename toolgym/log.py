"""Logging set-up shared by the CLI and library code: library modules only call
`get_logger(__name__)`; the CLI decides once how records are shown (`--log-level`, or the
TOOLGYM_LOG variable)."""

from __future__ import annotations

import logging
import sys
import warnings

from rich.console import Console
from rich.logging import RichHandler

from toolgym.errors import ConfigError

_ROOT = "toolgym"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


_installed: logging.Handler | None = None
"""The handler setup_logging added (once per process)."""


def get_logger(name: str) -> logging.Logger:
    """A logger under the `toolgym` hierarchy (silent until `setup_logging` runs)."""
    return logging.getLogger(name if name.startswith(_ROOT) else f"{_ROOT}.{name}")


def setup_logging(level: str | int = "INFO") -> None:
    """Show toolgym's log records on stderr; safe to call more than once.
    Libraries' own chatter (transformers' progress bars and advice, its deprecation
    warnings) is kept down unless DEBUG is asked for."""
    if isinstance(level, str):
        if level.upper() not in LEVELS:
            raise ConfigError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
        level = level.upper()
    root = logging.getLogger(_ROOT)
    root.setLevel(level)
    global _installed
    if _installed is None:
        _installed = _handler()
        root.addHandler(_installed)
    if root.level > logging.DEBUG:
        quiet_libraries()


def _handler() -> logging.Handler:
    """rich's on a terminal; off one (a log file, a pipe), plain whole lines that are never
    wrapped, with the time, level and logger."""
    console = Console(stderr=True, emoji=False)
    handler: logging.Handler
    if console.is_terminal:
        handler = RichHandler(console=console, show_path=False, rich_tracebacks=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    return handler


def quiet_libraries() -> None:
    """Through the variables transformers and huggingface_hub read when they are imported,
    and through their own calls when they were imported first (a script that imports
    transformers before toolgym); a value the user set is kept."""
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity(
            transformers_logging.log_levels.get(os.environ["TRANSFORMERS_VERBOSITY"].lower(),
                                                logging.ERROR)
        )  # fmt: skip
        if os.environ["HF_HUB_DISABLE_PROGRESS_BARS"].upper() in ("1", "ON", "YES", "TRUE"):
            transformers_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers(\..*)?")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"transformers(\..*)?")
