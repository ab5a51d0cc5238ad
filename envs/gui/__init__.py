"""GUI environments: real pages in headless Chromium (Playwright, the system's browser),
observed as an accessibility-tree outline (and optionally a screenshot), acted on by tools."""

from toolgym.envs.gui.browser import BrowserPool, find_chromium
from toolgym.envs.gui.browser_env import BrowserEnv
from toolgym.envs.gui.miniwob import MiniWoBEnv, task_names
from toolgym.envs.gui.page_tree import PageTree, read_tree

__all__ = [
    "BrowserEnv",
    "BrowserPool",
    "MiniWoBEnv",
    "PageTree",
    "find_chromium",
    "read_tree",
    "task_names",
]
