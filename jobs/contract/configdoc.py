"""The config reference, generated from the pydantic schema in `jobs.contract.config` so it cannot drift:
`autoresearch config --schema` (JSON schema), `--example` (commented YAML, every field at its
default) and `--markdown` (the README's table; tests/jobs/contract/test_configdoc.py fails when they differ).
Pure: strings out, no I/O.
"""
from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

import annotated_types as at
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from jobs.contract.config import CONFIG_PATH, TargetConfig

# The required fields, filled in for the example (the demo target's values, shortened).
REQUIRED_EXAMPLE: dict[str, Any] = {
    "build": "make -s",
    "benchmark": "./bench.sh",
    "checks": "./checks.sh",
    "metrics": [{"name": "tg_tps", "direction": "higher", "primary": True, "unit": "", "clock": "wall"}],
    "editable": ["src/**"],
}


def schema_json() -> str:
    return json.dumps(TargetConfig.model_json_schema(), indent=2) + "\n"


# -- walking the models ---------------------------------------------------------------------------
def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _optional(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in _args(tp) if a is not type(None)]
        if len(rest) == 1:
            return rest[0], True
    return tp, False


def _model(tp: Any) -> type[BaseModel] | None:
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _type_name(tp: Any) -> str:
    tp, nullable = _optional(tp)
    origin = typing.get_origin(tp)
    if origin is Literal:
        name = " or ".join(f"`{a}`" for a in _args(tp))
    elif origin is list:
        inner = _args(tp)[0]
        name = "list of mappings" if _model(inner) else f"list of {_type_name(inner)}"
    elif origin is dict:
        value = _args(tp)[1]
        name = f"map of name to {'mapping' if _model(value) else _type_name(value)}"
    elif _model(tp):
        name = "mapping"
    else:
        name = {str: "text", int: "integer", float: "number", bool: "true/false"}.get(tp, getattr(tp, "__name__", str(tp)))
    return name + (" or null" if nullable else "")


def _bounds(field: FieldInfo) -> str:
    words = []
    for m in field.metadata:
        for cls, attr, sign in ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"), (at.Le, "le", "<=")):
            if isinstance(m, cls):
                words.append(f"{sign} {getattr(m, attr)}")
        if isinstance(m, at.MinLen):
            words.append(f"at least {m.min_length}")
    return ", ".join(words)


def _default(field: FieldInfo) -> Any:
    return field.get_default(call_default_factory=True)


def _shown(value: Any) -> str:
    if isinstance(value, BaseModel):
        return ""                                  # its fields have their own rows
    if isinstance(value, list):
        value = [v.model_dump(exclude_defaults=True) if isinstance(v, BaseModel) else v for v in value]
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _describe(field: FieldInfo, tp: Any) -> str:
    text = field.description or ""
    inner, _ = _optional(tp)
    if typing.get_origin(inner) is list:
        inner = _args(inner)[0]
    if not text and _model(inner) and inner.__doc__:
        text = " ".join(inner.__doc__.split("\n\n")[0].split())
    return text


def rows(model: type[BaseModel] = TargetConfig, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted field, type, default, description) for every field, nested ones after their parent."""
    out = []
    for name, field in model.model_fields.items():
        path = prefix + name
        tp = field.annotation
        bounds = _bounds(field)
        kind = _type_name(tp) + (f" ({bounds})" if bounds else "")
        default = "**required**" if field.is_required() else _shown(_default(field))
        out.append((path, kind, default, _describe(field, tp)))
        inner, _ = _optional(tp)
        if typing.get_origin(inner) is list and _model(_args(inner)[0]):
            out += rows(_args(inner)[0], f"{path}[].")
        elif typing.get_origin(inner) is dict and _model(_args(inner)[1]):
            out += rows(_args(inner)[1], f"{path}.<name>.")
        elif _model(inner):
            out += rows(inner, f"{path}.")
    return out


def markdown_table() -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    lines = ["| field | type | default | what |", "|---|---|---|---|"]
    lines += [f"| `{p}` | {cell(k)} | {cell(d)} | {cell(w)} |" for p, k, d, w in rows()]
    return "\n".join(lines) + "\n"


# -- the commented example ------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip() \
        .removesuffix("\n...").removesuffix("...").strip()


def _flow(value: Any) -> str:
    return _scalar(value)


def _example_lines(model: type[BaseModel], values: dict[str, Any], indent: int) -> list[str]:
    lines = []
    pad = "  " * indent
    for name, field in model.model_fields.items():
        value = values[name]
        tp, _ = _optional(field.annotation)
        note = _describe(field, field.annotation)
        bounds = _bounds(field)
        comment = "; ".join(x for x in (("required" if field.is_required() else ""), note, bounds) if x)
        if _model(tp) and isinstance(value, dict):
            lines.append(f"{pad}{name}:" + (f"  # {comment}" if comment else ""))
            lines += _example_lines(tp, value, indent + 1)
        else:
            lines.append(f"{pad}{name}: {_flow(value)}" + (f"  # {comment}" if comment else ""))
    return lines


def example_yaml() -> str:
    config = TargetConfig.model_validate(REQUIRED_EXAMPLE)
    head = [f"# {CONFIG_PATH}: every field, at its default unless marked required",
            "# (generated by `autoresearch config --example` from the schema in jobs/contract/config.py).",
            "# Commands run with bash in the root of a clean checkout of the commit being measured."]
    return "\n".join(head + _example_lines(TargetConfig, config.model_dump(mode="json"), 0)) + "\n"
