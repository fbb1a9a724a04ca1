"""Watch events: what one stored change looks like to one watcher, and the wire encoding (pure, no I/O).

A watch stream is newline-delimited JSON, one ``{"type": ..., "object": ...}`` per line. With a
label or field selector, an object that starts matching shows up as ADDED and one that stops
matching as DELETED, as on the real server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from integration.kubeapi.selectors import FieldRequirement, Selector, fields_match, matches


@dataclass(frozen=True)
class Change:
    """One committed change: its resourceVersion, kind key, namespace, and the object before/after.

    ``old`` is None for a creation; ``new`` is None for a deletion (then ``old`` is the final state).
    """

    rv: int
    key: tuple[str, str]
    namespace: str | None
    old: dict[str, Any] | None
    new: dict[str, Any] | None


def _selected(obj: Mapping[str, Any] | None, labels: Selector, fields: tuple[FieldRequirement, ...]) -> bool:
    if obj is None:
        return False
    return matches(labels, (obj.get("metadata") or {}).get("labels")) and fields_match(fields, obj)


def event_for(
    change: Change, labels: Selector = (), fields: tuple[FieldRequirement, ...] = ()
) -> tuple[str, dict[str, Any]] | None:
    """The (type, object) a watcher with these selectors sees for ``change``, or None."""
    before = _selected(change.old, labels, fields)
    after = _selected(change.new, labels, fields)
    if change.new is None:
        return ("DELETED", change.old) if before and change.old is not None else None
    if before and after:
        return ("MODIFIED", change.new)
    if after:
        return ("ADDED", change.new)
    if before:
        return ("DELETED", change.new)
    return None


def encode_event(kind: str, obj: Mapping[str, Any]) -> bytes:
    """One line of a watch stream."""
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def bookmark(api_version: str, kind: str, rv: int) -> dict[str, Any]:
    """The object of a BOOKMARK event: only the kind and the resourceVersion reached."""
    return {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(rv)}}


def decode_events(lines: bytes | str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Decode the complete lines of a watch stream into (type, object) pairs (blank lines skipped)."""
    text = lines.decode() if isinstance(lines, bytes) else lines
    for line in text.splitlines():
        if line.strip():
            event = json.loads(line)
            yield event["type"], event["object"]
