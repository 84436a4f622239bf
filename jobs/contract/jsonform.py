"""Pure: the JSON form of the contract's typed records that must write back exactly what they read
(`jobs.contract.calibrated`, `jobs.contract.runnerview`, `jobs.contract.noisetrack`,
`jobs.contract.machinefacts`; `JsonRecord` gives a record its `from_json` / `to_json`, `per_key` reads
a mapping of them, e.g. per platform).

A dataclass using these helpers ends with two bookkeeping fields, `extra` (keys this version does
not know, kept and written back) and `keys` (the keys it was read with, in their order; None when
built here). `from_json` reads a mapping into it; `to_json` writes a loaded object's keys in their
order, values untouched, then any new unknown keys, or a built object's fields in their order (an
`optional` one only when it is not None) then its unknown keys. A field whose value is itself such
a record (`nested`) is read with its type's `from_json`; a record, or a list of them, is written with
its `to_json`.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

Json = dict[str, Any]
BOOKKEEPING = ("extra", "keys")


def field_names(cls) -> tuple[str, ...]:
    """The names of a record's fields as its JSON form has them (its bookkeeping left out)."""
    return tuple(f.name for f in fields(cls) if f.name not in BOOKKEEPING)


def from_json(cls, data: Mapping[str, Any], nested: Mapping[str, Any] | None = None):
    """`cls` from its JSON form; a `nested` field's mapping is read by its type's `from_json` (a
    typed value, or one that is not a mapping, e.g. null, stays as it is)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a {cls.__name__} is a JSON object, not {type(data).__name__}")
    names = field_names(cls)
    values = {k: v for k, v in data.items() if k in names}
    for name, kind in (nested or {}).items():
        if isinstance(values.get(name), Mapping):
            values[name] = kind.from_json(values[name])
    return cls(**values, extra={k: v for k, v in data.items() if k not in names}, keys=tuple(data))


def to_json(obj, optional: tuple[str, ...] = ()) -> Json:
    """The object's JSON form (see the module docstring); a nested record's value is its `to_json()`."""
    names = field_names(type(obj))
    if obj.keys is None:
        order = [k for k in names if not (k in optional and getattr(obj, k) is None)]
    else:
        order = list(obj.keys)
    out = {k: obj.extra[k] if k in obj.extra else _plain(getattr(obj, k))
           for k in order if k in obj.extra or k in names}
    out.update({k: v for k, v in obj.extra.items() if k not in out})
    return out


def _plain(value: Any) -> Any:
    """A value's JSON form: a record's `to_json()`, a list's items each in theirs."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    to = getattr(value, "to_json", None)
    return to() if callable(to) and not isinstance(value, type) else value


class JsonRecord:
    """A base for such a record: `from_json`, and `to_json` writing its `_OPTIONAL` fields when set."""
    _OPTIONAL = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        return from_json(cls, data)

    def to_json(self) -> Json:
        return to_json(self, self._OPTIONAL)


def per_key(cls, data: Mapping[str, Any] | None) -> dict[str, Any]:
    """key (e.g. a platform) -> a `cls` from its JSON form (a typed value is taken as it is)."""
    return {k: v if isinstance(v, cls) else cls.from_json(v) for k, v in (data or {}).items()}


def per_key_json(value: Mapping[str, Any]) -> Json:
    return {k: v.to_json() for k, v in value.items()}
