"""Each listed job's finished JSON, kept between ``GET jobs`` answers, and the answer assembled from
those pieces (pure: no I/O).

Mapping a ``JobInfo`` to a version's ``job_info`` and shaping it by that version's document is a
pure function of the job's message and the cluster name, and it costs tens of microseconds a job:
most of a 10,000-job list's answer time. A :class:`RenderedJobs` maps each job's encoded
``JobInfo`` (framed as in a ``GetJobsResponse``) to the job's serialised JSON (``bytes``), for one
cluster name. Equal encodings mean equal messages, so a hit gives byte for byte the JSON the
renderer would give: the cache is exact by construction whatever changed the job, and a job whose
encoding changed misses and is rendered again. On the leader the encodings are the very ``bytes``
objects the controller's GetJobs cache keeps (:mod:`spur.rpc.jobinfo_cache`), so a lookup hashes
each once and then finds it by identity: nothing is decoded or encoded again for an unchanged job.
Elsewhere (a follower, one job's GET) the decoded messages are encoded again (``SerializeToString``
is C-level, a few microseconds a job).

The pieces come back as a :class:`RenderedList`. The answer's envelope (``meta``, ``errors``, ...)
is serialised with a one-byte placeholder where the list goes (:data:`PLACEHOLDER`: a raw NUL, which
``orjson`` never writes, as it escapes control characters), and :func:`splice` puts the pieces in
its place as ``[a,b,...]`` in chunks of about ``chunk`` bytes, to be sent one after the other: no
44 MB body is built, serialised again or copied whole (``orjson.dumps`` of the pieces as
``orjson.Fragment`` copied every byte once more, and the HTTP layer joined it once more).

Entries of jobs no longer listed (or listed with another encoding since) are dropped when a complete
listing shows the cache holds more than that listing (+1,000) entries, so the cache holds about one
entry per listed job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import orjson

from spur.rpc.jobinfo_cache import frame
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
    """Per job: its framed ``JobInfo`` encoding (the key) -> the JSON ``render(job, cluster)`` gave."""

    def __init__(self, render: Render) -> None:
        """``render``: a pure function of the message and the cluster name -> the job's JSON."""
        self._render = render
        self._entries: dict[bytes, bytes] = {}
        self._cluster: str | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def render_frames(self, frames: Sequence[bytes], cluster: str, complete: bool = False) -> RenderedList:
        """Each job's JSON, in order, from its framed encoding (field 1 of a ``GetJobsResponse``:
        what :meth:`spur.controller.service.ControllerService.read_job_frames` gives). Jobs not
        cached are decoded together (one C-level parse) and rendered. ``complete``: ``frames`` is
        everything a full listing shows, so entries of other jobs may be dropped (see the module
        docstring). A cluster name other than the last one's empties the cache."""
        if cluster != self._cluster:
            self._entries = {}
            self._cluster = cluster
        entries = self._entries
        found: list[bytes | None] = [*map(entries.get, frames)]  # None where not cached
        missing = [i for i, data in enumerate(found) if data is None] if None in found else []
        if missing:
            jobs = pb.GetJobsResponse.FromString(b"".join([frames[i] for i in missing])).jobs
            render = self._render
            for i, job in zip(missing, jobs, strict=True):
                found[i] = entries[frames[i]] = render(job, cluster)
        self.hits += len(found) - len(missing)
        self.misses += len(missing)
        if complete:
            self.prune(frames)
        return RenderedList(cast(list[bytes], found))

    def prune(self, frames: Sequence[bytes]) -> None:
        """``frames`` is everything a full listing shows: when the cache holds more than that
        (+1,000) entries, entries of other encodings are dropped (amortised O(1) a listed job).
        Entries missing for some of ``frames`` are left missing."""
        entries = self._entries
        if len(entries) > len(frames) + 1000:
            self._entries = {f: entries[f] for f in frames if f in entries}

    def missing(self, frames: Sequence[bytes]) -> list[bytes]:
        """The ``frames`` (framed encodings) this cache holds no JSON for, in order."""
        entries = self._entries
        return [f for f in frames if f not in entries]

    def fragments(self, jobs: Sequence[pb.JobInfo], cluster: str, complete: bool = False) -> RenderedList:
        """:meth:`render_frames` for decoded messages (a follower's GetJobs answer, one job's GET)."""
        return self.render_frames([frame(job.SerializeToString()) for job in jobs], cluster, complete)
