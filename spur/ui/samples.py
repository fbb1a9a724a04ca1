"""The per-minute samples behind the Overview charts: a bounded ring kept in spurctld's memory.

Contracts:

- :func:`take_sample` is pure: from the nodes' capacity and allocation and the jobs' times it computes one
  :class:`Sample` for the minute ``[minute - 60, minute)`` (allocated and total CPUs/GPUs/memory and the
  queue depth as they are at the call, jobs started and finished inside the minute).
- :class:`SampleRing` keeps the newest ``capacity`` samples (default one week of minutes), one per
  minute: adding a sample for a minute already held replaces it. Nothing is replicated or written to
  disk: each controller samples its own applied state (the same on every member), a restart starts an
  empty ring, and the leader's ring is what a UI served by the leader shows.
- :class:`Sampler` takes a sample at every wall-clock minute boundary while spurctld serves the UI,
  reading the state a slice at a time (:func:`sample_in_slices`): a scan of every job kept would
  otherwise hold the controller's event loop (85 ms at 60,000 jobs, measured under ``bench.fleet``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import NamedTuple, Protocol, TypeVar

import trio

__all__ = [
    "JobTimes", "NodeLoad", "Sample", "SampleRing", "Sampler", "Tally", "sample_in_slices", "take_sample",
    "WEEK_MINUTES",
]  # fmt: skip

WEEK_MINUTES = 7 * 24 * 60
T = TypeVar("T")


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


class Tally:
    """One sample being added up: nodes and jobs may come in any number of slices, in any order
    (pure). :func:`take_sample` is the whole of it at once; :func:`sample_in_slices` feeds it a slice
    at a time between the event loop's other work."""

    def __init__(self, minute: int) -> None:
        self.minute = minute
        self._start = minute - 60
        self._totals = [0, 0, 0, 0, 0, 0]  # cpus, alloc cpus, gpus, alloc gpus, memory, alloc memory
        self.pending = self.running = self.started = self.finished = 0

    def add_nodes(self, nodes: Iterable[NodeLoad]) -> None:
        totals = self._totals
        for n in nodes:
            for i, value in enumerate(n):
                totals[i] += value

    def add_jobs(self, jobs: Iterable[JobTimes]) -> None:
        start, minute = self._start, self.minute
        for j in jobs:
            if j.state == "PENDING":
                self.pending += 1
            elif j.state in ("RUNNING", "COMPLETING", "SUSPENDED"):
                self.running += 1
            if j.start_time and start <= j.start_time < minute:
                self.started += 1
            if j.end_time and j.state in _TERMINAL and start <= j.end_time < minute:
                self.finished += 1

    def sample(self) -> Sample:
        cpus, alloc_cpus, gpus, alloc_gpus, mem_total, mem_alloc = self._totals
        return Sample(self.minute, cpus, alloc_cpus, gpus, alloc_gpus, mem_total, mem_alloc,
                      self.pending, self.running, self.started, self.finished)  # fmt: skip


def take_sample(nodes: Iterable[NodeLoad], jobs: Iterable[JobTimes], minute: int) -> Sample:
    """One sample for the minute ending at ``minute`` (see the module docstring)."""
    tally = Tally(minute)
    tally.add_nodes(nodes)
    tally.add_jobs(jobs)
    return tally.sample()


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
    """What the sampler reads: the nodes' loads and the jobs' times, each lazily, item by item as it
    is when read (a slice at a time, with the event loop's other work in between)."""

    def node_loads(self) -> Iterator[NodeLoad]: ...

    def job_times(self) -> Iterator[JobTimes]: ...


# Items read between two checkpoints: a slice costs a few milliseconds, so a big cluster's sample
# (300,000 jobs kept for MinJobAge at 1,000 jobs/s) no longer holds the loop for a whole scan.
SLICE_ITEMS = 2000


async def sample_in_slices(source: SampleSource, minute: int, *, slice_items: int = SLICE_ITEMS) -> Sample:
    """The sample of the minute ending at ``minute``, read from ``source`` ``slice_items`` items at a
    time with a Trio checkpoint after each slice. A job or node that changes meanwhile is counted as
    it was when its slice was read."""
    if slice_items < 1:
        raise ValueError("a slice holds at least one item")
    tally = Tally(minute)
    await _add_in_slices(source.node_loads(), tally.add_nodes, slice_items)
    await _add_in_slices(source.job_times(), tally.add_jobs, slice_items)
    return tally.sample()


async def _add_in_slices(items: Iterator[T], add: Callable[[list[T]], None], slice_items: int) -> None:
    """``add`` each slice of ``items`` as it is read, with a checkpoint after each."""
    while chunk := list(islice(items, slice_items)):
        add(chunk)
        await trio.lowlevel.checkpoint()


class Sampler:
    """Adds a sample to ``ring`` at each minute boundary of ``wall`` (a unix-seconds clock)."""

    def __init__(self, ring: SampleRing, source: SampleSource, wall: Callable[[], float]) -> None:
        self.ring = ring
        self.source = source
        self.wall = wall

    async def sample_now(self, minute: int) -> Sample:
        return await sample_in_slices(self.source, minute)

    async def run(self) -> None:
        while True:
            now = self.wall()
            boundary = math.floor(now / 60) * 60 + 60
            await trio.sleep(max(0.0, boundary - now))
            self.ring.add(await self.sample_now(int(boundary)))
