"""Typed configuration: pydantic models loaded from YAML with `a.b=value` overrides.

Config classes subclass `ConfigModel`, which forbids unknown keys, so a typo such as
`trainer.lrr=1e-5` is an error that names the closest real field instead of a silently
ignored setting.
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import core_schema

from toolgym.errors import ConfigError, did_you_mean

M = TypeVar("M", bound="ConfigModel")


class ConfigModel(BaseModel):
    """Base for every config section: unknown keys are errors, values are validated, and a
    number is finite (an infinite weight or rate would train on inf and nan, not fail)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True,
        allow_inf_nan=False,
    )  # fmt: skip
    """A field's docstring (the string under it) is its description: the generated
    settings reference (docs/training-settings.md) prints it."""


@dataclass(frozen=True)
class Choices:
    """`name: Annotated[str, Choices(REGISTRY)]`: a setting's allowed values, the keys of the
    registry it names an entry of, read when a value is checked, so a variant added to the
    registry is a choice everywhere at once. REGISTRY may be "package.module:NAME": imported
    on the first check, so importing a config class loads no registry (nor torch with it)."""

    registry: Collection[str] | str

    @property
    def names(self) -> Collection[str]:
        if not isinstance(self.registry, str):
            return self.registry
        module, _, attribute = self.registry.partition(":")
        names: Collection[str] = getattr(importlib.import_module(module), attribute)
        return names

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def check(self, value: str) -> str:
        names = self.names
        if value not in names:
            known = ", ".join(map(repr, names))
            raise ValueError(f"'{value}' is not one of {known}.{did_you_mean(value, names)}")
        return value


def load_config(model: type[M], path: str | Path | None = None, overrides: list[str] = ()) -> M:  # type: ignore[assignment]
    """Build `model` from an optional YAML file, then apply `dotted.key=value` overrides.

    Override values are parsed as YAML scalars (`1e-5`, `true`, `[1, 2]`).
    """
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_yaml(Path(path))
    for item in overrides:
        _apply_override(data, item)
    return validate(model, data)


def validate(model: type[M], data: dict[str, Any]) -> M:
    """`model` from `data`, or a ConfigError that names each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, model)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping at the top, not {type(data).__name__}"
        )
    return data


def _apply_override(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r} must look like section.field=value")
    *parents, leaf = key.strip().split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: {part!r} is a value, not a section")
        node = child
    try:
        node[leaf] = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        node[leaf] = raw


def _explain(exc: ValidationError, model: type[BaseModel]) -> str:
    lines = [f"invalid {model.__name__} config:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            name = str(err["loc"][-1])
            homes = _sections_holding(_model_at(model, err["loc"][:-1]), name)
            hint = (
                f" Did you mean {' or '.join(homes)}?" if homes
                else did_you_mean(name, _fields_at(model, err["loc"][:-1]))
            )  # fmt: skip
            lines.append(f"  {where}: unknown setting.{hint}")
        elif not err["loc"]:  # a model validator's check: its message says it all
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"  {where}: {err['msg']} (got {err.get('input')!r})")
    return "\n".join(lines)


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    return list(getattr(_model_at(model, loc), "model_fields", {}))


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    current: Any = model
    for part in loc:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return None
        current = section_model(field.annotation)
    return current


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The config class a field holds (`X`, `X | None`, `list[X]`), or None for a value."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _sections_holding(model: Any, name: str) -> list[str]:
    """`section.name` for each section directly under `model` with a field `name`, so a
    setting given one level too high (or from before it moved) is pointed to its place."""
    found = []
    for field_name, field in getattr(model, "model_fields", {}).items():
        section = section_model(field.annotation)
        if section is not None and name in section.model_fields:
            found.append(f"{field_name}.{name}")
    return found
