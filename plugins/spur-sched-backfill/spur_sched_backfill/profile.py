"""Per-node resource availability over time (the backfill "profile").

A ``NodeProfile`` is a step function: interval ``k`` covers ``[times[k], times[k+1])`` (the last one
runs to infinity) and holds the free CPUs, free memory, the bit mask of free GPU indices and the
number of jobs holding resources on the node during that interval. ``times[0]`` is the planning
instant ("now"). Running jobs add steps where they end; planned starts and reservations subtract
resources over their window. Everything here is pure and private to one scheduling call.
"""

from __future__ import annotations

import math
from bisect import bisect_right

ALL_BITS = -1  # identity for "&" on GPU masks


def mask_of(indices: tuple[int, ...] | list[int]) -> int:
    """Bit mask with bit ``i`` set for every GPU index ``i``."""
    mask = 0
    for index in indices:
        if index >= 0:
            mask |= 1 << index
    return mask


def indices_of(mask: int, count: int) -> list[int]:
    """The ``count`` lowest set bit positions of ``mask`` (fewer if it has fewer)."""
    out: list[int] = []
    while mask and len(out) < count:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class NodeProfile:
    """Free resources of one node as a step function of time; see the module docstring."""

    __slots__ = ("times", "cpus", "mem", "gpus", "jobs")

    def __init__(self, now: float, cpus: int, mem: int, gpus: int, jobs: int) -> None:
        self.times: list[float] = [now]
        self.cpus: list[int] = [cpus]
        self.mem: list[int] = [mem]
        self.gpus: list[int] = [gpus]
        self.jobs: list[int] = [jobs]

    @classmethod
    def build(
        cls,
        now: float,
        free: tuple[int, int, int, int],
        totals: tuple[int, int, int],
        releases: list[tuple[float, int, int, int]],
    ) -> NodeProfile:
        """Profile from the free resources now plus ``(time, cpus, mem, gpu_mask)`` releases.

        Each release also ends one job on the node. Free amounts are clamped to ``totals``
        (cpus, mem, gpu mask) so inconsistent snapshots cannot invent resources.
        """
        cpus, mem, gpus, jobs = free
        total_cpus, total_mem, total_gpus = totals
        prof = cls(now, cpus, mem, gpus, jobs)
        if not releases:
            return prof
        releases.sort(key=lambda r: r[0])
        for when, c, m, g in releases:
            cpus = min(total_cpus, cpus + c)
            mem = min(total_mem, mem + m)
            gpus = (gpus | g) & total_gpus
            jobs = max(0, jobs - 1)
            if when == prof.times[-1]:
                prof.cpus[-1], prof.mem[-1], prof.gpus[-1], prof.jobs[-1] = cpus, mem, gpus, jobs
            else:
                prof.times.append(when)
                prof.cpus.append(cpus)
                prof.mem.append(mem)
                prof.gpus.append(gpus)
                prof.jobs.append(jobs)
        return prof

    def index_at(self, t: float) -> int:
        """Index of the interval containing ``t`` (``t`` must be >= ``times[0]``)."""
        return bisect_right(self.times, t) - 1

    def _split(self, t: float) -> int:
        """Make ``t`` a breakpoint and return the index of the interval starting there."""
        i = bisect_right(self.times, t) - 1
        if self.times[i] == t:
            return i
        i += 1
        self.times.insert(i, t)
        self.cpus.insert(i, self.cpus[i - 1])
        self.mem.insert(i, self.mem[i - 1])
        self.gpus.insert(i, self.gpus[i - 1])
        self.jobs.insert(i, self.jobs[i - 1])
        return i

    def take(self, start: float, end: float, cpus: int, mem: int, gpu_mask: int) -> None:
        """Hold ``cpus``, ``mem`` and the GPUs in ``gpu_mask`` (and one job slot) over [start, end)."""
        i = self._split(start)
        stop = self._split(end) if end != math.inf else len(self.times)
        keep = ~gpu_mask
        for k in range(i, stop):
            self.cpus[k] -= cpus
            self.mem[k] -= mem
            self.gpus[k] &= keep
            self.jobs[k] += 1

    def next_time_after(self, t: float) -> float:
        """First breakpoint strictly after ``t``; infinity when there is none."""
        i = bisect_right(self.times, t)
        return self.times[i] if i < len(self.times) else math.inf
