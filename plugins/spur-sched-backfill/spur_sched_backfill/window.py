"""Hot-path checks of a node profile over a time window (kept as plain functions for speed).

``need_c``/``need_m`` are the CPUs and memory a job needs on the node, ``gpn`` the free GPUs it
needs among those in ``tmask`` (the node's GPUs of the wanted model; ``-1`` for any model), and
``excl`` means the job wants the whole node, so no other job may hold anything there (an idle
node's free CPUs and memory are its totals, so the CPU and memory checks still apply).
"""

from __future__ import annotations

import math
from bisect import bisect_right

from spur_sched_backfill.profile import ALL_BITS, NodeProfile


def fits(
    p: NodeProfile, i: int, end: float, need_c: int, need_m: int, gpn: int, tmask: int, excl: bool
) -> bool:
    """Whether the need is met in every interval from index ``i`` up to ``end``."""
    times, cpus, mem, jobs, gpus = p.times, p.cpus, p.mem, p.jobs, p.gpus
    k = len(times)
    g = ALL_BITS
    while True:
        if cpus[i] < need_c or mem[i] < need_m or (excl and jobs[i]):
            return False
        if gpn:
            g &= gpus[i]
            if (g & tmask).bit_count() < gpn:
                return False
        i += 1
        if i >= k or times[i] >= end:
            return True


def aggregate(p: NodeProfile, i: int, end: float) -> tuple[int, int, int, int]:
    """(min free cpus, min free memory, GPUs free throughout, max jobs) from index ``i`` to ``end``."""
    times, cpus, mem, jobs, gpus = p.times, p.cpus, p.mem, p.jobs, p.gpus
    k = len(times)
    c, m, g, j = cpus[i], mem[i], gpus[i], jobs[i]
    i += 1
    while i < k and times[i] < end:
        c = min(c, cpus[i])
        m = min(m, mem[i])
        g &= gpus[i]
        j = max(j, jobs[i])
        i += 1
    return c, m, g, j


def earliest(
    p: NodeProfile,
    start: float,
    duration: float,
    need_c: int,
    need_m: int,
    gpn: int,
    tmask: int,
    excl: bool,
    bound: float,
) -> float:
    """Earliest ``s >= start`` such that the need is met over ``[s, s + duration)``.

    Returns infinity when that never happens, and ``bound`` (a lower bound on the answer) as soon
    as it is clear the answer is not below ``bound``, which lets callers prune.
    """
    times, cpus, mem, jobs, gpus = p.times, p.cpus, p.mem, p.jobs, p.gpus
    k = len(times)
    i = bisect_right(times, start) - 1
    s = start
    while s < bound:
        end = s + duration
        j = i
        g = ALL_BITS
        while True:
            bad = cpus[j] < need_c or mem[j] < need_m or (excl and jobs[j] != 0)
            gpu_bad = False
            if not bad and gpn:
                g &= gpus[j]
                gpu_bad = bad = (g & tmask).bit_count() < gpn
            if bad:
                break
            j += 1
            if j >= k or times[j] >= end:
                return s
        # When interval j fails on its own no start before its end can work; when only the GPU
        # intersection with earlier intervals failed, the next breakpoint is worth trying.
        if gpu_bad and (gpus[j] & tmask).bit_count() >= gpn:
            i += 1
        else:
            i = j + 1
        if i >= k:
            return math.inf
        s = times[i]
    return bound
