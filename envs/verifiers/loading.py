"""A verifiers taskset found by its id, made with its own config type, and its tasks read:
and what toolgym refuses in it, with the reason, before any episode runs.

An id is what verifiers takes (an installed taskset package, `name` or `owner/name`), a module
that exports its Taskset in `__all__` (`pkg.module`), or `pkg.module:ClassName`.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
from collections.abc import Callable
from typing import Any

import verifiers.v1 as vf
from pydantic import ValidationError
from verifiers.v1.mcp.server import ServerBase
from verifiers.v1.session import hook_boundary
from verifiers.v1.state import State, state_cls
from verifiers.v1.utils.generic import concrete_type
from verifiers.v1.utils.loaders import environment_class, taskset_class

from toolgym.errors import ConfigError, one_line

MAX_TASKS = 100_000
"""The most tasks read from a taskset (an infinite one is cut here)."""


def taskset_type(taskset_id: str) -> type[vf.Taskset]:
    """The Taskset class `taskset_id` names."""
    try:
        if ":" in taskset_id:
            module_name, _, name = taskset_id.partition(":")
            found = getattr(importlib.import_module(module_name), name)
        elif "." in taskset_id and "/" not in taskset_id:
            found = _exported(importlib.import_module(taskset_id))
        else:
            found = taskset_class(taskset_id)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(f"no verifiers taskset {taskset_id!r}: {one_line(exc)}") from None
    if not (inspect.isclass(found) and issubclass(found, vf.Taskset)):
        raise ConfigError(f"{taskset_id!r} is not a verifiers Taskset (it is {found!r})")
    return found


def _exported(module: Any) -> type:
    names = getattr(module, "__all__", None) or []
    found = [
        o
        for n in names
        if inspect.isclass(o := getattr(module, n, None)) and issubclass(o, vf.Taskset)
    ]
    if len(found) != 1:
        raise TypeError(
            f"{module.__name__} exports {len(found)} Taskset classes in __all__ (one is needed)"
        )
    return found[0]


def make_taskset(taskset_id: str, settings: dict[str, Any]) -> vf.Taskset:
    """The taskset made with its own config type from `settings` (its fields)."""
    cls = taskset_type(taskset_id)
    config_type = concrete_type(cls, vf.TasksetConfig, origin=vf.Taskset) or vf.TasksetConfig
    try:
        config = config_type.model_validate({**settings, "id": taskset_id})
    except ValidationError as exc:
        raise ConfigError(f"settings of taskset {taskset_id!r}: {exc}") from None
    return cls(config)


def read_tasks(taskset: vf.Taskset) -> list[vf.Task]:
    """Its tasks (at most MAX_TASKS)."""
    return list(itertools.islice(iter(taskset), MAX_TASKS))


def unsupported(taskset_id: str, taskset: vf.Taskset, task: vf.Task) -> list[str]:
    """What in this taskset toolgym cannot run, each with the reason (empty: all of it);
    `task` is one of its tasks."""
    task_cls = type(task)
    config = taskset.config.task
    found: list[str] = []
    if "." not in taskset_id and ":" not in taskset_id:
        env_cls = environment_class(taskset_id)
        if env_cls is not vf.SingleAgentEnv:
            found.append(
                f"its package's own verifiers Env ({env_cls.__name__}: several agents or a "
                "simulated user); toolgym plays one agent against the tasks"
            )
    if task_cls.NEEDS_CONTAINER:
        found.append("its tasks need a container (a verifiers runtime); toolgym has none for them")
    for hook in ("setup", "finalize", "stage_verifier"):
        if getattr(task_cls, hook) is not getattr(vf.Task, hook):
            found.append(
                f"Task.{hook} runs in a verifiers runtime (a sandbox box), which toolgym does not start"
            )
    if config.judges:
        names = ", ".join(str(getattr(j, "id", j)) for j in config.judges)
        found.append(f"judges ({names}) need a judge model to call; score with rewards instead")
    if task.data.prompt is None:
        found.append(
            "its tasks have no prompt (a simulated user opens them); toolgym's open with it"
        )
    for kind in ("reward", "metric"):
        for fn in task.hooks(kind):
            if _needs_runtime(fn):
                found.append(f"the {kind} {fn.__name__} reads a verifiers runtime (a sandbox box)")
    for fn in task.hooks("stop"):
        try:
            boundary = hook_boundary(fn, allow_trace=True)
        except TypeError as exc:
            found.append(f"the stop {fn.__name__}: {exc}")
            continue
        if boundary is not vf.Trace:
            found.append(
                f"the stop {fn.__name__} reads the model's raw {boundary.__name__}; "
                "toolgym's stops see the trace"
            )
    for toolset in [*task_cls.toolsets(config), *type(taskset).toolsets(taskset.config)]:
        found += [
            f"the toolset {type(toolset).__name__} {why}" for why in toolset_problems(toolset)
        ]
    return found


def toolset_problems(toolset: ServerBase) -> list[str]:
    problems = []
    if state_cls(type(toolset)) is not State:
        problems.append("keeps rollout state through verifiers' state channel")
    if type(toolset).setup_task is not ServerBase.setup_task:
        problems.append("is set up per task through verifiers' task channel")
    kind = str(getattr(getattr(toolset.config, "runtime", None), "type", "subprocess"))
    if getattr(toolset.config, "url", None) is None and kind != "subprocess":
        problems.append(f"runs in a {kind} runtime; toolgym starts toolsets as local processes")
    return problems


def _needs_runtime(fn: Callable[..., Any]) -> bool:
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty
