"""Callables named in configs as "package.module:function"."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from toolgym.errors import ConfigError


def load_callable(path: str, what: str) -> Callable[..., Any]:
    """The function `path` names; a ConfigError that says which part is wrong otherwise.
    `what` names it in the message ("reward function", "success check")."""
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"{what} {path!r} must look like package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what} {path}: cannot import {module_name}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"{what} {path}: {module_name} has no function {name!r}")
    return function
