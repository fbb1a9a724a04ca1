"""Each listed job's finished JSON, kept between ``GET jobs`` answers, and the answer assembled from
those pieces (pure: no I/O).

Mapping a ``JobInfo`` to a version's ``job_info`` and shaping it by that version's document is a
pure function of the job's message and the cluster name, and it costs tens of microseconds a job:
most of a 10,000-job list's answer time. A :class:`RenderedJobs` keeps, per job id, the job's
encoded ``JobInfo`` (the key), the cluster name and the job's serialised JSON (``bytes``). Equal
encodings mean equal messages, so a hit gives byte for byte the JSON the renderer would give: the
cache is exact by construction whatever changed the job, and a job whose encoding changed is
rendered again. Comparing the encodings costs a few microseconds a job (``SerializeToString`` is
C-level).

The pieces come back as a :class:`RenderedList`. The answer's envelope (``meta``, ``errors``, ...)
is serialised with a one-byte placeholder where the list goes (:data:`PLACEHOLDER`: a raw NUL, which
``orjson`` never writes, as it escapes control characters), and :func:`splice` puts the pieces in
its place as ``[a,b,...]`` in chunks of about ``chunk`` bytes, to be sent one after the other: no
44 MB body is built, serialised again or copied whole (``orjson.dumps`` of the pieces as
``orjson.Fragment`` copied every byte once more, and the HTTP layer joined it once more).

Entries of jobs no longer listed are dropped when a complete listing shows the cache holds more
than that listing (+1,000) entries, so the cache holds about one entry per listed job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from spur.rpc.proto import spur_pb2 as pb

__all__ = ["PLACEHOLDER", "RenderedJobs", "RenderedList", "render_answer", "splice"]

Render = Callable[[pb.JobInfo, str], bytes]

PLACEHOLDER = orjson.Fragment(b"\x00")  # a raw NUL: never in orjson's own output
CHUNK_BYTES = 1 << 20


class RenderedList(list[bytes]):
    """Items already serialised as JSON (each one value), to be placed in an answer as they are."""


def splice(envelope: bytes, items: Sequence[bytes], chunk: int = CHUNK_BYTES) -> list[bytes]:
    """The answer ``envelope`` with its one :data:`PLACEHOLDER` (serialised as ``[<placeholder>]``)
    replaced by ``[`` the ``items`` joined by ``,`` ``]``, as consecutive chunks of about ``chunk``
    bytes each (their concatenation is the whole answer). ValueError when ``envelope`` does not
    hold exactly one placeholder list."""
    parts = envelope.split(b"[\x00]")
    if len(parts) != 2:
        raise ValueError(f"the envelope holds {len(parts) - 1} placeholder lists, not 1")
    head, tail = parts
    out: list[bytes] = []
    pending: list[bytes] = [head, b"["]
    size = 0
    first = True
    for item in items:
        if not first:
            pending.append(b",")
        first = False
        pending.append(item)
        size += len(item)
        if size >= chunk:
            out.append(b"".join(pending))
            pending, size = [], 0
    pending += [b"]", tail]
    out.append(b"".join(pending))
    return out


def render_answer(
    data: dict[str, Any], shaper: Callable[[Any], Any] | None = None, chunk: int = CHUNK_BYTES
) -> list[bytes]:
    """``data`` shaped by ``shaper`` (when given) and serialised, as consecutive chunks. At most one
    value of ``data`` may be a :class:`RenderedList`; its items are spliced in as they are
    (:func:`splice`), so the bytes are those of ``orjson.dumps`` with each item as an
    ``orjson.Fragment``. ValueError for two pre-rendered lists."""
    rendered = [key for key, value in data.items() if isinstance(value, RenderedList)]
    if not rendered:
        return [orjson.dumps(shaper(data) if shaper is not None else data)]
    if len(rendered) > 1:
        raise ValueError(f"an answer holds at most one pre-rendered list, not {len(rendered)}")
    items = data[rendered[0]]
    envelope = {**data, rendered[0]: [PLACEHOLDER]}
    return splice(orjson.dumps(shaper(envelope) if shaper is not None else envelope), items, chunk)


class RenderedJobs:
    """Per job id: (encoded ``JobInfo``, cluster, the JSON ``render(job, cluster)`` gave)."""

    def __init__(self, render: Render) -> None:
        """``render``: a pure function of the message and the cluster name -> the job's JSON."""
        self._render = render
        self._entries: dict[int, tuple[bytes, str, bytes]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def fragments(self, jobs: Sequence[pb.JobInfo], cluster: str, complete: bool = False) -> RenderedList:
        """Each job's JSON, in order. ``complete``: ``jobs`` is everything a full listing shows, so
        entries of other jobs may be dropped (see the module docstring)."""
        entries = self._entries
        render = self._render
        out = RenderedList()
        append = out.append
        hits = 0
        for job in jobs:
            key = job.SerializeToString()
            found = entries.get(job.job_id)
            if found is not None and found[0] == key and found[1] == cluster:
                append(found[2])
                hits += 1
                continue
            data = render(job, cluster)
            entries[job.job_id] = (key, cluster, data)
            append(data)
        self.hits += hits
        self.misses += len(out) - hits
        if complete and len(entries) > len(out) + 1000:
            listed = {job.job_id for job in jobs}
            self._entries = {i: e for i, e in entries.items() if i in listed}
        return out
