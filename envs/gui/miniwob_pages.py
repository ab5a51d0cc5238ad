"""The MiniWoB++ pages the installed `miniwob` package ships, found without importing it or a
browser: registration reads them at every `import toolgym`."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from toolgym.errors import ConfigError

NONDETERMINISTIC = frozenset({
    "book-flight", "book-flight-nodelay", "choose-date", "choose-date-easy", "choose-date-medium",
    "choose-date-nodelay", "click-dialog", "click-dialog-2", "click-pie", "click-pie-nodelay",
    "click-scroll-list", "drag-cube", "order-food", "phone-book", "scroll-text", "scroll-text-2",
    "search-engine", "social-media", "social-media-all", "social-media-some", "stock-market",
    "terminal",
})  # fmt: skip
"""Tasks whose pages the miniwob package itself registers as not reproducible from a seed."""


@cache
def pages_dir() -> Path:
    """The folder of the task pages the `miniwob` package ships (found, not imported:
    importing it registers its own Selenium envs with Gymnasium)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("MiniWoB++ tasks need the miniwob package: pip install 'toolgym[gui]'")
    return Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"


def task_names() -> list[str]:
    """Every MiniWoB++ task the installed package ships (empty when it is not installed)."""
    try:
        return sorted(p.stem for p in pages_dir().glob("*.html"))
    except ConfigError:
        return []
