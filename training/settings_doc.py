"""The reference of every training setting, generated from TrainConfig itself (each field's
type, default and docstring), so the document cannot drift from the code: a test compares
docs/training-settings.md with this output.

    python -m toolgym.training.settings_doc > docs/training-settings.md
"""

from __future__ import annotations

import re
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from toolgym.config import Choices, section_model
from toolgym.training.advantages import ESTIMATORS
from toolgym.training.config import TrainConfig
from toolgym.training.rewards import SOURCES

HEADER = """# Training settings

Every setting of `toolgym train`, generated from `training/config.py` (regenerate with
`python -m toolgym.training.settings_doc > docs/training-settings.md`; a test keeps the two
equal). Set them in a YAML file (`--config`) or as `section.field=value` overrides on the
command line; values are checked, and an unknown key is an error.

<!-- snippet: tested-by tests/test_config.py::test_yaml_then_overrides -->
```bash
toolgym train model=runs/sft optim.lr=1e-5 rollout.tasks_per_step=16 env.kwargs.size=4
```
"""


def settings_markdown() -> str:
    top, sections, lists = [], [], []
    for name, field in TrainConfig.model_fields.items():
        inner = section_model(field.annotation)
        if inner is None:
            top.append(_row(name, field))
        elif typing.get_origin(field.annotation) is list:
            lists.append((name, inner, field))
        else:
            sections.append((name, inner, field))
    out = [HEADER, "", "## Run", "", *_table(top)]
    for name, model, field in sections:
        out += ["", f"## {name}", "", _describe(field), "", *_table(_rows(model, f"{name}."))]
        lists += [
            (f"{name}.{inner_name}", inner, inner_field)
            for inner_name, inner_field in model.model_fields.items()
            if typing.get_origin(inner_field.annotation) is list
            and (inner := section_model(inner_field.annotation)) is not None
        ]
    for name, model, field in lists:
        out += [
            "", f"## {name} (a list)", "", _describe(field), "",
            f"Each entry of `{name}` has:", "", *_table(_rows(model, "")),
        ]  # fmt: skip
    for name, estimator in ESTIMATORS.items():
        if (own := estimator.settings) is not None:
            out += [
                "", f"## advantage.{name}", "", " ".join((own.__doc__ or "").split()), "",
                *_table(_rows(own, f"advantage.{name}.")),
            ]  # fmt: skip
    for name, kind in SOURCES.items():
        if (settings := kind.settings) is not None:
            out += [
                "", f"## rewards: {name}'s kwargs", "", " ".join((settings.__doc__ or "").split()), "",
                *_table(_rows(settings, "")),
            ]  # fmt: skip
    return "\n".join(line.rstrip() for line in out).strip() + "\n"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    return [_row(prefix + name, field) for name, field in model.model_fields.items()]


def _row(name: str, field: FieldInfo) -> str:
    choices = next((m for m in field.metadata if isinstance(m, Choices)), None)
    kind = f"one of {', '.join(map(repr, choices.names))}" if choices else _type(field.annotation)
    return f"| `{name}` | {kind} | {_default(field)} | {_describe(field)} |"


def _table(rows: list[str]) -> list[str]:
    return ["| setting | type | default | what it does |", "|---|---|---|---|", *rows]


def _describe(field: FieldInfo) -> str:
    return " ".join((field.description or "").split()).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return "`" + ", ".join(str(v.model_dump(exclude_defaults=True)) for v in value) + "`"
    return f"`{value!r}`"


def _type(annotation: Any) -> str:
    text = re.sub(r"\btyping\.|<class '([^']+)'>", lambda m: m.group(1) or "", str(annotation))
    text = text.replace("NoneType", "None").replace("Literal", "one of ")
    text = re.sub(r"toolgym\.[\w.]+\.(\w+)Section", lambda m: m.group(1).lower(), text)
    return text.replace("|", "or")


if __name__ == "__main__":
    print(settings_markdown(), end="")
