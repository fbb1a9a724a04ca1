"""Plain-data (JSON-ready) conversion of the domain dataclasses.

``to_plain`` turns a dataclass tree into dicts/lists/scalars (enums by value); ``from_plain``
rebuilds it from the type hints, ignoring unknown keys and defaulting missing ones so that
snapshots written by an older version still load.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def to_plain(value: Any) -> Any:
    """Convert dataclasses, enums, lists, tuples and dicts into JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(args[0], value) if len(args) == 1 else value
    if origin in (list, tuple):
        (arg, *_rest) = typing.get_args(tp) or (Any,)
        built = [_build(arg, v) for v in value]
        return tuple(built) if origin is tuple else built
    if origin is dict:
        _k, varg = typing.get_args(tp) or (Any, Any)
        return {k: _build(varg, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_plain(tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    return value


def from_plain(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild dataclass ``cls`` from ``to_plain`` output."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _build(hints[f.name], data[f.name])
    return cls(**kwargs)
