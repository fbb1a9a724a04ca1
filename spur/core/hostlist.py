"""Slurm hostlist expressions: expand ``gpu[01-08,10]`` into names and compress names back.

Behaviour follows Slurm 22.05's ``hostlist.c`` (one-dimensional clusters):

* Top-level separators are commas and whitespace; commas inside brackets separate ranges.
* A token may hold several bracket groups (``rack[1-2]-node[01-02]``); they expand as a cartesian
  product with the leftmost group varying slowest. Nothing may follow the last ``]``.
* A range's zero padding is the width of its low bound (``[001-010]`` -> 3 digits, ``[9-11]`` -> none).
* Compression keeps input order and duplicates; a host joins the previous range only when it has the
  same prefix, the next number and an equivalent width. Consecutive ranges with the same prefix share
  one bracket (``gpu1,gpu3,gpu2`` -> ``gpu[1,3,2]``).

Deliberate differences from Slurm: a ``[`` without ``]`` (or a stray ``]``) is an error instead of
being kept as part of a hostname, and expansion is capped at :data:`MAX_HOSTS` names in total.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_HOSTS = 1_000_000
# Numbers longer than this are not treated as a numeric suffix (Slurm's strtoul would saturate).
_MAX_DIGITS = 18
_SEPARATORS = frozenset(" \t\n\r,")
_TRAILING_DIGITS = re.compile(r"(\d+)$")
# A name with none of the hostlist syntax (brackets, separators): compressed alone, it is itself.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")


class HostlistError(ValueError):
    """A malformed hostlist expression; the message names the expression."""


class _Range:
    """A prefix with an inclusive numeric range, or a single host without a numeric suffix.

    A plain class rather than a dataclass: ``scontrol``/``squeue`` import this module, and the
    dataclasses machinery (inspect, ast) would cost their cold start more than all of hostlist."""

    __slots__ = ("prefix", "lo", "hi", "width", "single")

    def __init__(self, prefix: str, lo: int = 0, hi: int = 0, width: int = 0, single: bool = False) -> None:
        self.prefix, self.lo, self.hi, self.width, self.single = prefix, lo, hi, width, single

    def _key(self) -> tuple[str, int, int, int, bool]:
        return (self.prefix, self.lo, self.hi, self.width, self.single)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Range) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return "_Range(prefix={!r}, lo={!r}, hi={!r}, width={!r}, single={!r})".format(*self._key())

    def count(self) -> int:
        return 1 if self.single else self.hi - self.lo + 1

    def names(self) -> Iterable[str]:
        if self.single:
            yield self.prefix
            return
        for n in range(self.lo, self.hi + 1):
            yield f"{self.prefix}{n:0{self.width}d}"

    def numstr(self) -> str:
        if self.lo < self.hi:
            return f"{self.lo:0{self.width}d}-{self.hi:0{self.width}d}"
        return f"{self.lo:0{self.width}d}"


def _zero_padded(num: int, width: int) -> int:
    return max(0, width - len(str(num)))


def _width_combine(a: _Range, b: _Range) -> bool:
    """Slurm's ``_width_equiv``: may a and b share a format width? Adjusts one width if so."""
    if a.width == b.width:
        return True
    npad, nmpad = _zero_padded(a.lo, a.width), _zero_padded(a.lo, b.width)
    mpad, mnpad = _zero_padded(b.lo, b.width), _zero_padded(b.lo, a.width)
    if npad != nmpad and mpad != mnpad:
        return False
    if npad != nmpad:
        b.width = a.width
    else:
        a.width = b.width
    return True


def _same_prefix(a: _Range, b: _Range) -> bool:
    return a.prefix == b.prefix and a.single == b.single


class _HostList:
    """An ordered list of ranges built the way Slurm's ``hostlist_push_range`` builds it."""

    def __init__(self) -> None:
        self.ranges: list[_Range] = []
        self.nhosts = 0

    def push(self, r: _Range) -> None:
        tail = self.ranges[-1] if self.ranges else None
        if (
            tail is not None
            and not r.single
            and not tail.single
            and tail.hi == r.lo - 1
            and _same_prefix(tail, r)
            and _width_combine(tail, r)
        ):
            tail.hi = r.hi
        else:
            self.ranges.append(_Range(r.prefix, r.lo, r.hi, r.width, r.single))
        self.nhosts += r.count()

    def push_host(self, name: str) -> None:
        m = _TRAILING_DIGITS.search(name)
        if m is None or len(m.group(1)) > _MAX_DIGITS:
            self.push(_Range(name, single=True))
            return
        digits = m.group(1)
        n = int(digits)
        self.push(_Range(name[: m.start()], n, n, len(digits)))

    def ranged_string(self) -> str:
        out: list[str] = []
        i, n = 0, len(self.ranges)
        while i < n:
            r = self.ranges[i]
            nxt = self.ranges[i + 1] if i + 1 < n else None
            bracket = r.count() > 1 or (nxt is not None and _within(r, nxt))
            if not bracket:
                out.append(r.prefix if r.single else r.prefix + r.numstr())
                i += 1
                continue
            parts = [r.numstr()]
            i += 1
            while i < n and _within(self.ranges[i], self.ranges[i - 1]):
                parts.append(self.ranges[i].numstr())
                i += 1
            out.append(f"{r.prefix}[{','.join(parts)}]")
        return ",".join(out)


def _within(a: _Range, b: _Range) -> bool:
    """Would a and b be printed inside the same bracket (same prefix, both numeric)?"""
    return a.prefix == b.prefix and not a.single and not b.single


def _tokens(expr: str) -> list[str]:
    """Split at top-level separators; separators inside brackets do not split."""
    tokens: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            if depth:
                raise HostlistError(f"Invalid hostlist: {expr} (nested '[')")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"Invalid hostlist: {expr} (unbalanced ']')")
            depth = 0
        elif ch in _SEPARATORS and not depth:
            if cur:
                tokens.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if depth:
        raise HostlistError(f"Invalid hostlist: {expr} (unbalanced '[')")
    if cur:
        tokens.append("".join(cur))
    return tokens


def _parse_range_list(text: str, expr: str) -> list[_Range]:
    """Parse the inside of one bracket: comma-separated ``N`` or ``LO-HI`` items (prefix left empty)."""
    out: list[_Range] = []
    for item in text.split(","):
        item = item.strip()
        lo_s, sep, hi_s = item.partition("-")
        if sep and not hi_s:
            hi_s = lo_s  # Slurm reads "5-" as 5
        if not sep:
            hi_s = lo_s
        if not (lo_s.isascii() and lo_s.isdigit() and hi_s.isascii() and hi_s.isdigit()):
            raise HostlistError(f"Invalid range: `{item}', Invalid hostlist: {expr}")
        if len(lo_s) > _MAX_DIGITS or len(hi_s) > _MAX_DIGITS:
            raise HostlistError(f"Too many hosts in range `{item}', Invalid hostlist: {expr}")
        lo, hi = int(lo_s), int(hi_s)
        if lo > hi:
            raise HostlistError(f"Invalid range: `{item}', Invalid hostlist: {expr}")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"Too many hosts in range `{item}', Invalid hostlist: {expr}")
        out.append(_Range("", lo, hi, len(lo_s)))
    return out


def _push_token(hl: _HostList, token: str, expr: str) -> None:
    if "[" not in token:
        hl.push_host(token)
        return
    if not token.endswith("]"):
        raise HostlistError(f"Invalid hostlist: {expr} (text after the last ']' in {token!r})")
    # Split "a[1-2]b[3-4]" into literal pieces and bracket groups: ["a", "1-2", "b", "3-4"].
    pieces = re.split(r"\[([^\]]*)\]", token)
    literals = pieces[0::2]  # one more literal than groups; the last is "" since the token ends in ']'
    groups = [_parse_range_list(g, expr) for g in pieces[1::2]]
    total = 1
    for g in groups:
        total *= sum(r.count() for r in g)
        if hl.nhosts + total > MAX_HOSTS:
            raise HostlistError(f"Invalid hostlist: {expr} (more than {MAX_HOSTS} hosts)")

    def prefixes(i: int, acc: str) -> Iterable[str]:
        if i == len(groups) - 1:
            yield acc + literals[i]
            return
        for r in groups[i]:
            for n in range(r.lo, r.hi + 1):
                yield from prefixes(i + 1, f"{acc}{literals[i]}{n:0{r.width}d}")

    for prefix in prefixes(0, ""):
        for r in groups[-1]:
            hl.push(_Range(prefix, r.lo, r.hi, r.width))


def _build(expr: str) -> _HostList:
    hl = _HostList()
    for token in _tokens(expr):
        _push_token(hl, token, expr)
        if hl.nhosts > MAX_HOSTS:
            raise HostlistError(f"Invalid hostlist: {expr} (more than {MAX_HOSTS} hosts)")
    return hl


def expand(expr: str) -> list[str]:
    """Expand a hostlist expression into host names, in Slurm's order, keeping duplicates.

    An empty or all-separator expression yields ``[]``. Raises :class:`HostlistError` for malformed
    input (unbalanced or nested brackets, reversed or non-numeric ranges, text after the last
    bracket) and for expressions naming more than :data:`MAX_HOSTS` hosts.
    """
    hl = _build(expr)
    return [name for r in hl.ranges for name in r.names()]


def count(expr: str) -> int:
    """Number of hosts :func:`expand` would return, without materialising the names."""
    return _build(expr).nhosts


def compress(names: Iterable[str]) -> str:
    """Compress host names into a ranged hostlist string exactly as ``scontrol show hostlist`` does.

    Input order and duplicates are kept (no sorting). Each item may itself be a hostlist expression.
    """
    if isinstance(names, (list, tuple)) and len(names) == 1 and _PLAIN_NAME.fullmatch(names[0]):
        return names[0]  # a one-node job's list: every launch and job listing compresses one
    hl = _HostList()
    for name in names:
        for token in _tokens(name):
            _push_token(hl, token, name)
        if hl.nhosts > MAX_HOSTS:
            raise HostlistError(f"Invalid hostlist: more than {MAX_HOSTS} hosts")
    return hl.ranged_string()
