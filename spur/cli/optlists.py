"""Option-value helpers that need no parser (so a command can use them without importing argparse)."""

from __future__ import annotations


def split_list(values: list[str] | None) -> list[str]:
    """Flatten repeated comma-separated option values ("-u a,b -u c")."""
    out: list[str] = []
    for v in values or []:
        out.extend(x for x in v.split(",") if x)
    return out
