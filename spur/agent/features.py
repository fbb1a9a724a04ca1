"""The node features spurd registers (Slurm's ``Features=``). Pure: no I/O.

Features are tags such as ``ib``, ``a100`` or ``zone=z1``. Jobs ask for them with ``--constraint``;
``spur k8s up --selector zone=z1`` scopes a managed Kubernetes cluster to the nodes that carry the
feature ``zone=z1``. ``sinfo -o %f`` and ``scontrol show node`` show them.

Where they come from, first match wins:

1. spurd's ``--features a,b`` flag (repeatable; each value comma-separated);
2. the ``features`` of the first ``[[nodes]]`` entry of spur.conf whose ``name`` (a hostlist) names
   this node, as slurm.conf's ``NodeName=... Features=...`` line does;
3. none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol


class FeatureError(ValueError):
    """A feature tag that cannot be registered (the message names it)."""


class _NodeEntry(Protocol):
    name: str
    features: Sequence[str]


def parse_features(values: Iterable[str]) -> list[str]:
    """Split comma-separated ``--features`` values into tags: trimmed, duplicates dropped, order kept.

    Raises FeatureError for a tag with whitespace or brackets, or for an empty list item (``a,,b``).
    """
    out: list[str] = []
    for value in values:
        for raw in value.split(","):
            tag = raw.strip()
            if not tag:
                raise FeatureError(f"invalid --features {value!r}: empty feature name")
            if any(c.isspace() or c in "[]" for c in tag):
                raise FeatureError(f"invalid feature {tag!r}: no spaces or brackets in a feature name")
            if tag not in out:
                out.append(tag)
    return out


def node_features(flag: Sequence[str] | None, entries: Sequence[_NodeEntry], node: str) -> list[str]:
    """The features ``node`` registers: the flag's if given, else its ``[[nodes]]`` entry's, else none.

    An entry whose name is not a valid hostlist is skipped (the config loader already rejects those).
    """
    if flag:
        return parse_features(flag)
    from spur.core.hostlist import HostlistError, expand

    for entry in entries:
        try:
            names = expand(entry.name)
        except HostlistError:
            continue
        if node in names:
            return parse_features(entry.features) if entry.features else []
    return []
