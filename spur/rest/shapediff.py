"""Compare a real slurmrestd answer with Spur's, by shape and by comparable values (pure, no I/O).

:func:`shape_diff` walks both JSON values together and returns one :class:`Difference` per place
they disagree, each named by its path (``jobs[0].job_state``):

- **types**: JSON types (``object``, ``list``, ``str``, ``number``, ``bool``, ``null``; an integer
  and a float are both ``number``). A type difference is reported once and not walked further.
- **keys**: an object's key the real server sends and Spur does not (``missing in spur``), or the
  other way round (``only in spur``).
- **lists**: elements are paired by position; an element without a partner (lists of different
  lengths) is still compared, by shape only, with the other side's first element. A list of
  scalars whose values are compared (flag and state arrays: ``["COMPLETED"]``) is compared as a set,
  since the real server's order is its enum's.
- **values**: scalars must be equal, except under an entry of ``unequal``, whose values legitimately
  differ between two clusters (ids, times, host names): a key name matches that key anywhere
  (``submit_time`` covers ``jobs[0].submit_time.number``), a path matches that place only, written
  without list positions (``jobs[].nodes``, not ``nodes[0].name``). The form of a Slurm number object (``{"set", "infinite",
  "number"}``) is always compared: its ``set`` and ``infinite`` flags, even under an ``unequal`` key.

A list's length is a value: lists of different lengths are a difference unless under an ``unequal``
key. The caller aligns lists whose order is not meaningful (both sides' jobs sorted by name) before
comparing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

NUMBER_OBJECT_KEYS = frozenset({"set", "infinite", "number"})


@dataclass(frozen=True, order=True)
class Difference:
    """One disagreement: ``path`` (``jobs[0].exit_code.status``) and what differs there."""

    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def json_type(value: object) -> str:
    """The JSON type name of a decoded value: ``object``, ``list``, ``str``, ``number``, ``bool``,
    ``null`` (``bool`` is checked before ``number``: in Python a bool is an int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def generic_path(path: str) -> str:
    """``jobs[0].exit_code`` -> ``jobs[].exit_code``: a path without its list positions, the form
    the known-difference tables use."""
    out: list[str] = []
    skipping = False
    for ch in path:
        if ch == "[":
            skipping = True
            out.append("[]")
        elif ch == "]":
            skipping = False
        elif not skipping:
            out.append(ch)
    return "".join(out)


def shape_diff(real: object, spur: object, unequal: Collection[str] = (), path: str = "") -> list[Difference]:
    """Every place ``spur`` differs from ``real`` (see the module docstring), sorted by path.

    ``unequal``: key names and paths whose values (and everything below them) are not compared, only
    their shape and the form of their number objects. ``path``: the prefix of the reported paths."""
    out: list[Difference] = []
    _walk(real, spur, path, frozenset(unequal), _VALUES, out)
    return sorted(out)


# how much of a pair is compared: everything; the shape and number objects' form (under an
# ``unequal`` key); the shape only (an element without a partner, against the other's first)
_VALUES, _FORM, _SHAPE = 2, 1, 0


def _is_number_object(value: object) -> bool:
    return isinstance(value, dict) and set(value) == NUMBER_OBJECT_KEYS


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _walk(real: Any, spur: Any, path: str, unequal: frozenset[str], level: int, out: list[Difference]) -> None:
    real_type, spur_type = json_type(real), json_type(spur)
    if real_type != spur_type:
        out.append(Difference(path, f"real {real_type}, spur {spur_type}"))
        return
    if real_type == "object":
        _walk_object(real, spur, path, unequal, level, out)
    elif real_type == "list":
        _walk_list(real, spur, path, unequal, level, out)
    elif level == _VALUES and real != spur:
        out.append(Difference(path, f"real {_show(real)}, spur {_show(spur)}"))


def _walk_object(
    real: dict[str, Any], spur: dict[str, Any], path: str, unequal: frozenset[str], level: int,
    out: list[Difference],
) -> None:  # fmt: skip
    number_object = _is_number_object(real) and _is_number_object(spur)
    for key in real:
        sub = f"{path}.{key}" if path else key
        if key not in spur:
            out.append(Difference(sub, f"missing in spur (real sends {json_type(real[key])})"))
            continue
        sub_level = _FORM if level == _VALUES and (key in unequal or generic_path(sub) in unequal) else level
        if number_object and key in ("set", "infinite") and level >= _FORM:
            sub_level = _VALUES  # the form of a number object is compared even under an unequal key
        _walk(real[key], spur[key], sub, unequal, sub_level, out)
    for key in spur:
        if key not in real:
            sub = f"{path}.{key}" if path else key
            out.append(Difference(sub, f"only in spur ({json_type(spur[key])}; real does not send it)"))


def _walk_list(
    real: list[Any], spur: list[Any], path: str, unequal: frozenset[str], level: int, out: list[Difference]
) -> None:
    scalars = all(json_type(v) not in ("object", "list") for v in [*real, *spur])
    if scalars and level == _VALUES:
        if sorted(map(repr, real)) != sorted(map(repr, spur)):
            out.append(Difference(path, f"real {_show(real)}, spur {_show(spur)}"))
        return
    if level == _VALUES and len(real) != len(spur):
        out.append(Difference(path, f"real {len(real)} items, spur {len(spur)}"))
    for i in range(max(len(real), len(spur))):
        sub = f"{path}[{i}]"
        if i < len(real) and i < len(spur):
            _walk(real[i], spur[i], sub, unequal, level, out)
        elif i < len(real) and spur:
            _walk(real[i], spur[0], sub, unequal, _SHAPE, out)
        elif i < len(spur) and real:
            _walk(real[0], spur[i], sub, unequal, _SHAPE, out)
