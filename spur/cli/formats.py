"""Slurm-style ``%[.][-]width letter`` format strings for squeue and sinfo (pure).

``parse_format`` splits a format into literal text and field specs; ``render`` fills one row from a
mapping of letter -> value. Slurm semantics: a width pads the value (left-justified, or right with
``.``) and truncates longer values; no width means the value as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_SPEC = re.compile(r"%(\.)?(-)?(\d+)?([a-zA-Z])")


@dataclass(frozen=True)
class Field:
    letter: str
    width: int | None
    right: bool


def parse_format(fmt: str) -> list[str | Field]:
    """Split a format string into literal strings and ``Field``s; ``%%`` is a literal percent."""
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


def render_header(parts: list[str | Field], headers: Mapping[str, str]) -> str:
    return render(parts, lambda letter: headers.get(letter, letter.upper()))
