"""GUI environments: real pages in headless Chromium (Playwright, the system's browser),
observed as an accessibility-tree outline (and optionally a screenshot), acted on by tools.

The names below load on first use: registration reads the MiniWoB++ page names at every
`import toolgym`, which must not load the browser envs with them."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "BrowserEnv": "toolgym.envs.gui.browser_env",
    "BrowserPool": "toolgym.envs.gui.browser",
    "MiniWoBEnv": "toolgym.envs.gui.miniwob",
    "PageTree": "toolgym.envs.gui.page_tree",
    "find_chromium": "toolgym.envs.gui.browser",
    "read_tree": "toolgym.envs.gui.page_tree",
    "task_names": "toolgym.envs.gui.miniwob_pages",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'toolgym.envs.gui' has no attribute {name!r}")
