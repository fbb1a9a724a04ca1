"""Trackable resources (TRES): Slurm's definitions, and TRES spec strings (pure, no I/O).

A TRES spec is what sacctmgr takes and prints for ``GrpTRES``, ``MaxTRESPerJob``, ...:
``cpu=16,mem=32768,gres/gpu=8``. Memory is kept in MiB; it is printed with Slurm's unit
suffixes (``mem=32G`` for 32768, ``mem=1000M`` for 1000). ``-1`` as a value means "clear this
limit" (kept as :data:`CLEAR` in a parsed spec so a modification can remove it).
"""

from __future__ import annotations

from dataclasses import dataclass

# A parsed value asking to remove the limit (``cpu=-1``).
CLEAR = -1


@dataclass(frozen=True)
class TresDef:
    """One TRES as ``sacctmgr show tres`` lists it."""

    id: int
    type: str
    name: str = ""

    @property
    def key(self) -> str:
        """The name used in specs: ``cpu``, ``mem``, ``fs/disk``, ``gres/gpu``."""
        return f"{self.type}/{self.name}" if self.name else self.type


# Slurm's built-in TRES (ids 1-8) plus the GPU gres Spur tracks (ids >= 1001 as in slurmdbd).
TRES_DEFS: tuple[TresDef, ...] = (
    TresDef(1, "cpu"),
    TresDef(2, "mem"),
    TresDef(3, "energy"),
    TresDef(4, "node"),
    TresDef(5, "billing"),
    TresDef(6, "fs", "disk"),
    TresDef(7, "vmem"),
    TresDef(8, "pages"),
    TresDef(1001, "gres", "gpu"),
)
TRES_KEYS: frozenset[str] = frozenset(d.key for d in TRES_DEFS)
_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
_MEMORY_LIKE = frozenset({"mem", "vmem", "fs/disk"})
# Upper bound of a TRES count (Slurm keeps them in a uint64; we refuse nonsense early).
MAX_COUNT = 1 << 62


class TresError(ValueError):
    """A TRES spec that does not parse; the message is for the user."""


def parse_tres(spec: str) -> dict[str, int]:
    """``"cpu=16,mem=32G,gres/gpu=8"`` -> ``{"cpu": 16, "mem": 32768, "gres/gpu": 8}``.

    Names are case-insensitive; ``gpu`` alone means ``gres/gpu``. Memory-like values take a
    K/M/G/T/P suffix (default M). ``name=-1`` yields :data:`CLEAR`. An empty spec is ``{}``.
    Raises :class:`TresError` for an unknown TRES, a missing ``=``, a repeated name or a bad count.
    """
    out: dict[str, int] = {}
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        name, eq, raw = item.partition("=")
        name = name.strip().lower()
        raw = raw.strip()
        if not eq or not name:
            raise TresError(f"Invalid TRES specification {item!r}: expected name=count")
        if name == "gpu":
            name = "gres/gpu"
        if name not in TRES_KEYS:
            known = ", ".join(sorted(TRES_KEYS))
            raise TresError(f"Invalid TRES name {name!r} (known: {known})")
        if name in out:
            raise TresError(f"TRES {name!r} is given twice")
        out[name] = _parse_count(name, raw)
    return out


def _parse_count(name: str, raw: str) -> int:
    if raw == "-1":
        return CLEAR
    number, unit = raw, ""
    if name in _MEMORY_LIKE and raw and raw[-1].upper() in _UNITS:
        number, unit = raw[:-1], raw[-1].upper()
    if not number.isdigit():
        if name in _MEMORY_LIKE:
            raise TresError(f"Invalid count {raw!r} for TRES {name!r}: expected a number with K/M/G/T/P")
        raise TresError(f"Invalid count {raw!r} for TRES {name!r}: expected a whole number")
    value = int(number)
    if unit:
        value = int(value * _UNITS[unit]) if unit != "K" else -(-value // 1024)
    if value > MAX_COUNT:
        raise TresError(f"Count {raw!r} for TRES {name!r} is too large")
    return value


def format_mem(mb: int) -> str:
    """MiB with Slurm's largest exact unit: 32768 -> ``32G``, 1000 -> ``1000M``, 0 -> ``0``."""
    if mb == 0:
        return "0"
    for unit, factor in (("P", 1024**3), ("T", 1024**2), ("G", 1024)):
        if mb % factor == 0:
            return f"{mb // factor}{unit}"
    return f"{mb}M"


def format_tres(tres: dict[str, int]) -> str:
    """Inverse of :func:`parse_tres` as Slurm prints it: names in sorted order, memory with units."""
    parts = []
    for name in sorted(tres):
        value = tres[name]
        if value == CLEAR:
            continue
        parts.append(f"{name}={format_mem(value) if name in _MEMORY_LIKE else value}")
    return ",".join(parts)


def merge_tres(current: dict[str, int], change: dict[str, int]) -> dict[str, int]:
    """Apply a parsed modification: set each named TRES, drop those set to :data:`CLEAR`."""
    out = dict(current)
    for name, value in change.items():
        if value == CLEAR:
            out.pop(name, None)
        else:
            out[name] = value
    return out
