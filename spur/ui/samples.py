"""The per-minute samples behind the Overview charts: a bounded ring kept in spurctld's memory.

Contracts:

- :func:`take_sample` is pure: from the nodes' capacity and allocation and the jobs' times it computes one
  :class:`Sample` for the minute ``[minute - 60, minute)`` (allocated and total CPUs/GPUs/memory and the
  queue depth as they are at the call, jobs started and finished inside the minute).
- :class:`SampleRing` keeps the newest ``capacity`` samples (default one week of minutes), one per
  minute: adding a sample for a minute already held replaces it. Nothing is replicated or written to
  disk: each controller samples its own applied state (the same on every member), a restart starts an
  empty ring, and the leader's ring is what a UI served by the leader shows.
- :class:`Sampler` takes a sample at every wall-clock minute boundary while spurctld serves the UI.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import trio

__all__ = ["JobTimes", "NodeLoad", "Sample", "SampleRing", "Sampler", "take_sample", "WEEK_MINUTES"]

WEEK_MINUTES = 7 * 24 * 60


class NodeLoad(NamedTuple):
    """One node's capacity and what is allocated on it."""

    cpus: int
    alloc_cpus: int
    gpus: int
    alloc_gpus: int
    memory_mb: int
    alloc_mem_mb: int


class JobTimes(NamedTuple):
    """What a sample needs of a job: its state and times (0 = unset)."""

    state: str
    start_time: float
    end_time: float


@dataclass(frozen=True)
class Sample:
    """The cluster during the minute ending at ``minute`` (unix seconds, a multiple of 60)."""

    minute: int
    cpus_total: int
    cpus_alloc: int
    gpus_total: int
    gpus_alloc: int
    mem_total_mb: int
    mem_alloc_mb: int
    pending: int
    running: int
    started: int
    finished: int


_TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                       "BOOT_FAIL", "DEADLINE"})  # fmt: skip


def take_sample(nodes: Iterable[NodeLoad], jobs: Iterable[JobTimes], minute: int) -> Sample:
    """One sample for the minute ending at ``minute`` (see the module docstring)."""
    totals = [0] * 6
    for n in nodes:
        for i, value in enumerate((n.cpus, n.alloc_cpus, n.gpus, n.alloc_gpus, n.memory_mb, n.alloc_mem_mb)):
            totals[i] += value
    start = minute - 60
    pending = running = started = finished = 0
    for j in jobs:
        if j.state == "PENDING":
            pending += 1
        elif j.state in ("RUNNING", "COMPLETING", "SUSPENDED"):
            running += 1
        if j.start_time and start <= j.start_time < minute:
            started += 1
        if j.end_time and j.state in _TERMINAL and start <= j.end_time < minute:
            finished += 1
    cpus, alloc_cpus, gpus, alloc_gpus, mem_total, mem_alloc = totals
    return Sample(
        minute, cpus, alloc_cpus, gpus, alloc_gpus, mem_total, mem_alloc, pending, running, started, finished
    )


class SampleRing:
    """The newest ``capacity`` samples, in minute order (see the module docstring)."""

    def __init__(self, capacity: int = WEEK_MINUTES) -> None:
        if capacity < 1:
            raise ValueError("a sample ring holds at least one sample")
        self._samples: deque[Sample] = deque(maxlen=capacity)

    def add(self, sample: Sample) -> None:
        if self._samples and self._samples[-1].minute == sample.minute:
            self._samples[-1] = sample
        elif self._samples and self._samples[-1].minute > sample.minute:
            raise ValueError(f"sample for minute {sample.minute} is older than the newest one held")
        else:
            self._samples.append(sample)

    def since(self, minute: float) -> list[Sample]:
        """The samples of minutes ending after ``minute``, oldest first."""
        return [s for s in self._samples if s.minute > minute]

    def __len__(self) -> int:
        return len(self._samples)


class SampleSource(Protocol):
    """What the sampler reads: the nodes' loads and the jobs' times, as they are now."""

    def node_loads(self) -> list[NodeLoad]: ...

    def job_times(self) -> list[JobTimes]: ...


class Sampler:
    """Adds a sample to ``ring`` at each minute boundary of ``wall`` (a unix-seconds clock)."""

    def __init__(self, ring: SampleRing, source: SampleSource, wall: Callable[[], float]) -> None:
        self.ring = ring
        self.source = source
        self.wall = wall

    def sample_now(self, minute: int) -> Sample:
        return take_sample(self.source.node_loads(), self.source.job_times(), minute)

    async def run(self) -> None:
        while True:
            now = self.wall()
            boundary = math.floor(now / 60) * 60 + 60
            await trio.sleep(max(0.0, boundary - now))
            self.ring.add(self.sample_now(int(boundary)))
