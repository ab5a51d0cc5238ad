"""Callables named in configs as "package.module:function", or "path/to/file.py:function" for
a file of the user's that is not an installed module (loaded as `python FILE` would run it:
with its folder on the import path, so it imports its neighbours)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError


def load_callable(path: str, what: str) -> Callable[..., Any]:
    """The function `path` names; a ConfigError that says which part is wrong otherwise.
    `what` names it in the message ("reward function", "success check")."""
    module_name, sep, name = path.rpartition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"{what} {path!r} must look like package.module:function")
    try:
        module = _from_file(module_name) if module_name.endswith(".py") else (
            importlib.import_module(module_name)
        )  # fmt: skip
    except (ImportError, SyntaxError) as exc:
        raise ConfigError(f"{what} {path}: cannot import {module_name}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"{what} {path}: {module_name} has no function {name!r}")
    return function


def _from_file(file: str) -> Any:
    """The module in `file`, loaded once per process under a name made from its path."""
    where = Path(file).resolve()
    if not where.is_file():
        raise ImportError(f"no file {where}")
    key = "toolgym_user_" + hashlib.sha1(str(where).encode()).hexdigest()[:12]
    if key in sys.modules:
        return sys.modules[key]
    if str(where.parent) not in sys.path:  # its own imports, after every installed package
        sys.path.append(str(where.parent))
    spec = importlib.util.spec_from_file_location(key, where)
    if spec is None or spec.loader is None:
        raise ImportError(f"{where} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module
