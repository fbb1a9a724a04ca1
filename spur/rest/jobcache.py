"""Each listed job's finished JSON, kept between ``GET jobs`` answers (pure: no I/O).

Mapping a ``JobInfo`` to a version's ``job_info`` and shaping it by that version's document is a
pure function of the job's message and the cluster name, and it costs tens of microseconds a job:
most of a 10,000-job list's answer time. A :class:`RenderedJobs` keeps, per job id, the job's
encoded ``JobInfo`` (the key), the cluster name and the job's serialised JSON as an
:class:`orjson.Fragment`, which ``orjson.dumps`` copies into the answer as it is. Equal encodings
mean equal messages, so a hit gives byte for byte the JSON the renderer would give: the cache is
exact by construction whatever changed the job, and a job whose encoding changed is rendered again.
Comparing the encodings costs a few microseconds a job (``SerializeToString`` is C-level).

Entries of jobs no longer listed are dropped when a complete listing shows the cache holds more
than that listing (+1,000) entries, so the cache holds about one entry per listed job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson

from spur.rpc.proto import spur_pb2 as pb

__all__ = ["RenderedJobs"]

Render = Callable[[pb.JobInfo, str], bytes]


class RenderedJobs:
    """Per job id: (encoded ``JobInfo``, cluster, the JSON ``render(job, cluster)`` gave)."""

    def __init__(self, render: Render) -> None:
        """``render``: a pure function of the message and the cluster name -> the job's JSON."""
        self._render = render
        self._entries: dict[int, tuple[bytes, str, orjson.Fragment]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def fragments(self, jobs: Sequence[pb.JobInfo], cluster: str, complete: bool = False) -> list[orjson.Fragment]:
        """Each job's JSON, in order, to be placed in a body that ``orjson.dumps`` serialises.
        ``complete``: ``jobs`` is everything a full listing shows, so entries of other jobs may be
        dropped (see the module docstring)."""
        entries = self._entries
        render = self._render
        out = []
        hits = 0
        for job in jobs:
            key = job.SerializeToString()
            found = entries.get(job.job_id)
            if found is not None and found[0] == key and found[1] == cluster:
                out.append(found[2])
                hits += 1
                continue
            fragment = orjson.Fragment(render(job, cluster))
            entries[job.job_id] = (key, cluster, fragment)
            out.append(fragment)
        self.hits += hits
        self.misses += len(out) - hits
        if complete and len(entries) > len(out) + 1000:
            listed = {job.job_id for job in jobs}
            self._entries = {i: e for i, e in entries.items() if i in listed}
        return out
