"""Plain-data (JSON-ready) conversion of the domain dataclasses.

``to_plain`` turns a dataclass tree into dicts/lists/scalars (enums by value); ``from_plain``
rebuilds it from the type hints, ignoring unknown keys and defaulting missing ones so that
snapshots written by an older version still load.

Both sit on the controller's hot path (every Raft entry is encoded once and decoded by each
follower and replay, every snapshot converts every job), so neither reflects on a class per value:
the first value of each type compiles a converter (the dataclass's field names; for ``from_plain``
one builder per field, derived from its type hint once) and later values reuse it. The output is
exactly what the reflective definition gives: dataclass instances first, then enums, then
lists/tuples, then dicts, anything else as it is.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

Converter = Callable[[Any], Any]

# Values that convert to themselves; checked by exact type (a bool is an int, an IntEnum is not).
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})

_TO_PLAIN: dict[type, Converter] = {}
_BUILDERS: dict[Any, Converter | None] = {}
_PLANS: dict[type, tuple[tuple[str, Converter | None], ...]] = {}


def to_plain(value: Any) -> Any:
    """Convert dataclasses, enums, lists, tuples and dicts into JSON-ready values."""
    t = type(value)
    if t in _SCALARS:
        return value
    conv = _TO_PLAIN.get(t)
    if conv is None:
        conv = _TO_PLAIN[t] = _compile_to_plain(t)
    return conv(value)


def _identity(value: Any) -> Any:
    return value


def _list_to_plain(value: Any) -> list[Any]:
    return [v if type(v) in _SCALARS else to_plain(v) for v in value]


def _dict_to_plain(value: Any) -> dict[Any, Any]:
    return {k: v if type(v) in _SCALARS else to_plain(v) for k, v in value.items()}


def _enum_value(value: enum.Enum) -> Any:
    return value.value


def _compile_to_plain(t: type) -> Converter:
    """The converter for instances of ``t`` (same precedence as the checks of the plain definition)."""
    if dataclasses.is_dataclass(t):
        names = tuple(f.name for f in dataclasses.fields(t))
        scalars = _SCALARS

        def dataclass_to_plain(value: Any) -> dict[str, Any]:
            out = {}
            for name in names:
                v = getattr(value, name)
                out[name] = v if type(v) in scalars else to_plain(v)
            return out

        return dataclass_to_plain
    if issubclass(t, enum.Enum):
        return _enum_value
    if issubclass(t, list | tuple):
        return _list_to_plain
    if issubclass(t, dict):
        return _dict_to_plain
    return _identity


def _builder(tp: Any) -> Converter | None:
    """A function rebuilding a non-None plain value as type ``tp``; None where the value is kept as is."""
    try:
        return _BUILDERS[tp]
    except KeyError:
        pass
    except TypeError:  # an unhashable hint: compile it every time (rare; never on the hot path)
        return _compile_builder(tp)
    built = _BUILDERS[tp] = _compile_builder(tp)
    return built


def _compile_builder(tp: Any) -> Converter | None:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _builder(args[0]) if len(args) == 1 else None
    if origin in (list, tuple):
        (arg, *_rest) = typing.get_args(tp) or (Any,)
        inner = _builder(arg)
        if origin is tuple:
            if inner is None:
                return tuple
            item: Converter = inner
            return lambda value: tuple(None if v is None else item(v) for v in value)
        if inner is None:
            return list
        element: Converter = inner
        return lambda value: [None if v is None else element(v) for v in value]
    if origin is dict:
        _k, varg = typing.get_args(tp) or (Any, Any)
        inner = _builder(varg)
        if inner is None:
            return lambda value: dict(value.items())
        return lambda value: {k: None if v is None else inner(v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda value: from_plain(tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    return None


def _plan(cls: type) -> tuple[tuple[str, Converter | None], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = _PLANS[cls] = tuple(
            (f.name, _builder(hints[f.name])) for f in dataclasses.fields(cls)
        )
    return plan


def from_plain(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild dataclass ``cls`` from ``to_plain`` output."""
    kwargs = {}
    for name, build in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = value if value is None or build is None else build(value)
    return cls(**kwargs)


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where ``a`` and ``b`` first differ, as a path (``.spec.env['X']``) and what differs there; None
    when they are the same tree: dataclasses of the same class with equal fields, lists, tuples and
    dicts of the same type, length and keys, and equal leaves of exactly the same type (``1`` and
    ``1.0``, a list and a tuple, an enum member and its value all differ). NaNs are equal here."""
    ta, tb = type(a), type(b)
    if ta is not tb:
        return f"{path or '.'}: {ta.__name__} vs {tb.__name__}"
    if dataclasses.is_dataclass(ta):
        for f in dataclasses.fields(ta):
            found = first_difference(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if found is not None:
                return found
        return None
    if ta is list or ta is tuple:
        if len(a) != len(b):
            return f"{path or '.'}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if ta is dict:
        for key in a:
            if key not in b:
                return f"{path}[{key!r}]: only in the first"
            found = first_difference(a[key], b[key], f"{path}[{key!r}]")
            if found is not None:
                return found
        extra = next((key for key in b if key not in a), None)
        return None if extra is None else f"{path}[{extra!r}]: only in the second"
    if ta is float and a != a and b != b:
        return None
    return None if a == b else f"{path or '.'}: {a!r} vs {b!r}"
