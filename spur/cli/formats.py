"""Slurm-style output formats (pure).

Two grammars share one representation, a list of literal strings and :class:`Field` specs:

* ``-o``/``--format`` (squeue, sinfo): ``%[.][width]<letter>``; text between fields is literal.
* ``-O``/``--Format`` (squeue): comma-separated ``name[:[.][width][suffix]]``; no ``:`` means width 20,
  ``:`` with no digits means no width; the suffix is printed after the field (header too).

Slurm semantics: a width pads the value (left-justified, or right with ``.``) and truncates longer
values; no width means the value as is.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

_SPEC = re.compile(r"%(\.)?(-)?(\d+)?([a-zA-Z])")
_LONG = re.compile(r"(\.)?(\d*)(.*)", re.DOTALL)
LONG_DEFAULT_WIDTH = 20


class FormatError(ValueError):
    """An unknown field name in a -O format; the message is Slurm's."""


class Field(namedtuple("Field", "letter width right header", defaults=(None,))):
    """One ``%`` field: ``letter`` (str), ``width`` (int or None), ``right`` (bool: right-aligned),
    ``header`` (str or None: the table's). collections.namedtuple: importing typing is a start-up cost."""

    __slots__ = ()


def parse_format(fmt: str) -> list[str | Field]:
    """Split a ``-o`` format string into literal strings and ``Field``s; ``%%`` is a literal percent."""
    parts: list[str | Field] = []
    pos = 0
    fmt = fmt.replace("%%", "\0")
    for m in _SPEC.finditer(fmt):
        if m.start() > pos:
            parts.append(fmt[pos : m.start()].replace("\0", "%"))
        parts.append(Field(m.group(4), int(m.group(3)) if m.group(3) else None, bool(m.group(1))))
        pos = m.end()
    if pos < len(fmt):
        parts.append(fmt[pos:].replace("\0", "%"))
    return parts


def parse_long_format(fmt: str, table: Mapping[str, tuple[str, str]]) -> list[str | Field]:
    """Parse a ``-O`` format against ``table`` (lower-case name -> (letter, header)).

    Raises :class:`FormatError` naming the first unknown field.
    """
    parts: list[str | Field] = []
    for token in fmt.split(","):
        if not token:
            continue
        name, colon, rest = token.partition(":")
        entry = table.get(name.lower())
        if entry is None:
            raise FormatError(f"Invalid job format specification: {name}")
        letter, header = entry
        if not colon:
            parts.append(Field(letter, LONG_DEFAULT_WIDTH, False, header))
            continue
        m = _LONG.fullmatch(rest)
        assert m is not None  # the pattern matches any string
        width = int(m.group(2)) if m.group(2) else 0
        parts.append(Field(letter, width or None, bool(m.group(1)), header))
        if m.group(3):
            parts.append(m.group(3))
    return parts


def fit(value: str, width: int | None, right: bool) -> str:
    if width is None:
        return value
    value = value[:width]
    return value.rjust(width) if right else value.ljust(width)


def render(parts: list[str | Field], lookup: Callable[[str], str]) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
        else:
            out.append(fit(lookup(p.letter), p.width, p.right))
    return "".join(out)


def render_rows(parts: list[str | Field], items: Iterable[T], value: Callable[[T, str], str]) -> list[str]:
    """``[render(parts, lambda letter: value(item, letter)) for item in items]``, with the parts
    unpacked once rather than per row and cell (squeue renders thousands of cells per call)."""
    cells = [
        (p, None, False, True) if isinstance(p, str) else (p.letter, p.width, p.right, False) for p in parts
    ]
    lines = []
    for item in items:
        out = []
        for text, width, right, literal in cells:
            if literal:
                out.append(text)
                continue
            v = value(item, text)
            if width is not None:
                v = v[:width]
                v = v.rjust(width) if right else v.ljust(width)
            out.append(v)
        lines.append("".join(out))
    return lines


def render_header(parts: list[str | Field], headers: Mapping[str, str]) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
        else:
            title = p.header if p.header is not None else headers.get(p.letter, p.letter.upper())
            out.append(fit(title, p.width, p.right))
    return "".join(out)
