"""Resource request parsing: memory sizes (--mem), generic resources (--gres) and GPUs (--gpus)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ResourceError",
    "GresRequest",
    "parse_memory_mb",
    "parse_gres",
    "parse_gres_item",
    "parse_gpus",
    "gpus_per_node",
    "format_gres",
]

# 2**53 MB is far beyond any machine and keeps values exact in JSON/float consumers.
MAX_MEMORY_MB = 2**53
MAX_GRES_COUNT = 2**31 - 1

_MEM_RE = re.compile(r"^(\d+)([kmgtKMGT]?)$")
_MEM_FACTOR = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class ResourceError(ValueError):
    """A malformed resource specification; the message names the spec."""


@dataclass(frozen=True)
class GresRequest:
    """One generic resource request: ``name[:type][:count]`` (type "" when unspecified)."""

    name: str
    type: str = ""
    count: int = 1

    def __str__(self) -> str:
        return format_gres(self)


def format_gres(req: GresRequest) -> str:
    """The canonical ``name[:type]:count`` form (what JobSpec.gres stores)."""
    return f"{req.name}:{req.type}:{req.count}" if req.type else f"{req.name}:{req.count}"


def parse_memory_mb(s: str) -> int:
    """Parse a Slurm memory size into megabytes (Slurm's ``str_to_mbytes``).

    A plain number is MB; suffixes K, M, G, T (any case) scale by 1024 (K rounds up to whole MB).
    ``"0"`` means "all memory of the node" and returns 0. Raises :class:`ResourceError` otherwise.
    """
    text = s.strip()
    m = _MEM_RE.match(text)
    if not m or len(m.group(1)) > 20:
        raise ResourceError(f"Invalid memory specification: {s!r}")
    value, suffix = int(m.group(1)), m.group(2).lower()
    mb = (value + 1023) // 1024 if suffix == "k" else value * _MEM_FACTOR[suffix]
    if mb > MAX_MEMORY_MB:
        raise ResourceError(f"Memory specification too large: {s!r}")
    return mb


def _parse_count(text: str, spec: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        raise ResourceError(f"Invalid GRES count in {spec!r}")
    n = int(text)
    if n > MAX_GRES_COUNT:
        raise ResourceError(f"Invalid GRES count in {spec!r}")
    return n


def parse_gres_item(item: str) -> GresRequest:
    """Parse one ``name``, ``name:count``, ``name:type`` or ``name:type:count`` item.

    A leading ``gres/`` (TRES notation) is accepted. A missing count means 1.
    """
    spec = item.strip()
    body = spec[5:] if spec.startswith("gres/") else spec
    parts = body.split(":")
    if not parts[0] or not _NAME_RE.match(parts[0]) or len(parts) > 3:
        raise ResourceError(f"Invalid GRES specification: {item!r}")
    name = parts[0]
    if len(parts) == 1:
        return GresRequest(name, "", 1)
    if len(parts) == 2:
        if parts[1].isdigit():
            return GresRequest(name, "", _parse_count(parts[1], item))
        if not _NAME_RE.match(parts[1]):
            raise ResourceError(f"Invalid GRES specification: {item!r}")
        return GresRequest(name, parts[1], 1)
    if not _NAME_RE.match(parts[1]):
        raise ResourceError(f"Invalid GRES specification: {item!r}")
    return GresRequest(name, parts[1], _parse_count(parts[2], item))


def parse_gres(items: list[str]) -> list[GresRequest]:
    """Parse ``--gres`` values; each item may be a comma list (``gpu:2,shard:1``).

    ``none`` (any case) as a whole item requests nothing. Order is kept.
    """
    out: list[GresRequest] = []
    for item in items:
        if item.strip().lower() == "none":
            continue
        for part in item.split(","):
            if not part.strip():
                raise ResourceError(f"Invalid GRES specification: {item!r}")
            out.append(parse_gres_item(part))
    return out


def parse_gpus(spec: str) -> GresRequest:
    """Parse ``--gpus``/``--gpus-per-node``/``--gpus-per-task``: ``count`` or ``type:count``.

    Returns a ``gpu`` request. Raises :class:`ResourceError` for anything else.
    """
    text = spec.strip()
    parts = text.split(":")
    if len(parts) == 1:
        return GresRequest("gpu", "", _parse_count(parts[0], spec))
    if len(parts) == 2 and _NAME_RE.match(parts[0]):
        return GresRequest("gpu", parts[0], _parse_count(parts[1], spec))
    raise ResourceError(f"Invalid GPU specification: {spec!r}")


def gpus_per_node(spec_gres: list[str]) -> tuple[int, str]:
    """Total GPUs requested per node by a JobSpec.gres list, and the GPU type ("" = any).

    The type is that of the first typed ``gpu`` item. Malformed items raise :class:`ResourceError`.
    """
    total = 0
    gpu_type = ""
    for req in parse_gres(spec_gres):
        if req.name != "gpu":
            continue
        total += req.count
        if req.type and not gpu_type:
            gpu_type = req.type
    return total, gpu_type
