"""How long a big listing holds the controller's event loop: the longest run-loop step of a
``GetNodes``, a cold and a warm ``GetJobs``, and the dashboard's minute sample, built whole
(as before slicing) and a slice at a time (``spur.controller.slicing``, ``spur.ui.samples``).

Builds a ``ClusterState`` in-process (``--nodes`` registered nodes, ``--jobs`` pending jobs, applied
as Raft would apply them, without the log codec) and serves the calls through ``ControllerService``
on a stand-in for the controller that has only what they read. Every other call, heartbeat and
Raft entry waits at least the longest step, so that is the figure; the whole answer's time is
printed beside it. Wall-clock time of each step of the calling task (a Trio instrument).

    python -m bench.listing_steps [--nodes 5000] [--jobs 60000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

import spur.controller.service as service_module
from bench.common import print_table
from spur.controller.service import ControllerService
from spur.controller.slicing import map_in_slices
from spur.core.job import JobSpec, Node
from spur.rpc.proto import spur_pb2 as pb
from spur.state import commands as c
from spur.state.machine import ClusterState
from spur.ui.app import ControllerSource
from spur.ui.samples import sample_in_slices, take_sample


class StepTimer(trio.abc.Instrument):
    """The longest step of ``task``, in seconds."""

    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.longest = 0.0
        self._began: float | None = None  # None until a step of ``task`` began under this timer

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self._began = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task and self._began is not None:
            self.longest = max(self.longest, time.perf_counter() - self._began)


class _Ctl:
    is_leader = True

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.clock = type("Clock", (), {"wall": staticmethod(time.time)})()

    async def leader_ready(self) -> None:
        return None

    async def read_barrier(self) -> None:
        return None


def build_state(nodes: int, jobs: int) -> ClusterState:
    state = ClusterState()
    for i in range(nodes):
        node = Node(name=f"node{i:05d}", address="127.0.0.1", cpus=64, memory_mb=256_000)
        state.apply_command(c.RegisterNode(node, 50.0))
    spec = JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)
    for _ in range(jobs):
        state.apply_command(c.SubmitJob(spec, "alice", 1000, 1000, "alice", 100.0))
    return state


async def _whole(items: Sequence[Any], fn: Callable[[Any], Any], **_: Any) -> list[Any]:
    return [fn(x) for x in items]  # the listing as it was built before slicing: one step


def measure(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(longest step, whole call) in ms."""
    timer = StepTimer()

    async def main() -> None:
        timer.task = trio.lowlevel.current_task()
        await trio.lowlevel.checkpoint()
        await call()

    began = time.perf_counter()
    trio.run(main, instruments=[timer])
    return timer.longest * 1000, (time.perf_counter() - began) * 1000


def _rows(label: str, slicer: Callable[..., Any], state: ClusterState, minute: int) -> list[tuple[object, ...]]:
    service_module.map_in_slices = slicer
    service = ControllerService(_Ctl(state))  # type: ignore[arg-type]  # a fresh GetJobs cache
    ctx: Any = type("Ctx", (), {"metadata": {}})()
    source = ControllerSource(state)
    cold = measure(lambda: service.GetJobs(pb.GetJobsRequest(), ctx))
    warm = measure(lambda: service.GetJobs(pb.GetJobsRequest(), ctx))
    nodes = measure(lambda: service.GetNodes(pb.GetNodesRequest(), ctx))

    async def sample() -> object:
        if slicer is map_in_slices:
            return await sample_in_slices(source, minute)
        return take_sample(source.node_loads(), source.job_times(), minute)

    return [
        (label, "GetNodes", *nodes),
        (label, "GetJobs, cold", *cold),
        (label, "GetJobs, warm", *warm),
        (label, "dashboard minute sample", *measure(sample)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--jobs", type=int, default=60000)
    args = ap.parse_args()
    began = time.perf_counter()
    state = build_state(args.nodes, args.jobs)
    print(f"state: {args.nodes} nodes, {args.jobs} jobs (built in {time.perf_counter() - began:.1f} s)")
    minute = int(time.time() // 60 * 60)
    rows: list[tuple[object, ...]] = []
    # Each way twice, taking turns, so neither has the warmer caches; the second round is printed.
    ways: list[tuple[str, Callable[..., Awaitable[list[Any]]]]] = [("whole", _whole), ("in slices", map_in_slices)]
    for label, slicer in ways * 2:
        if slicer is _whole:
            rows = []
        rows += _rows(label, slicer, state, minute)
    service_module.map_in_slices = map_in_slices
    print_table(("built", "answer", "longest step (ms)", "whole answer (ms)"), rows)


if __name__ == "__main__":
    main()
