"""The k8s drift sweep's cost.

1. Decision cost per tick: 10,000 registered nodes, 1,000 of them candidates (a scoped cluster of
   1,000 nodes; the 9,000 others outside it drained or down, so skipped), strays among them. One tick
   = node states + the read plan + 16 readings observed + the stop decision (no I/O). Target < 5 ms.
2. The controller's CPU share of the sweep over a simulated hour of a 5,000-node ready whole-inventory
   cluster: the real sweep task under Trio's MockClock with in-process agents answering Status
   (protobuf built per answer); process CPU seconds / 3,600 s. Real RPCs add their own cost per read
   (16 reads per 30 s tick at most, whatever the fleet size).

Usage: ``.venv/bin/python -m bench.k8s_drift [--ticks 200]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from trio.testing import MockClock

from spur.core.job import Node
from spur.k8s.cluster.drift import DriftTracker, Reading
from spur.k8s.cluster.drift_task import DriftSweep
from spur.rpc.proto import k0s_pb2
from spur.state import commands as c
from spur.state import k8s_cluster as k
from spur.state.machine import ClusterState


def build(n_nodes: int, members: int, scoped: bool, skipped_outside: bool) -> ClusterState:
    state = ClusterState()
    names = [f"n{i:05d}" for i in range(n_nodes)]
    for name in names:
        state.apply_command(c.RegisterNode(Node(name=name, address="127.0.0.1"), 0.0))
    roles = {n: ("controller" if i == 0 else "worker") for i, n in enumerate(names[:members])}
    state.apply_command(k.K8sUp(scoped, list(roles), [names[0]], roles, {}, {}, 0.0))
    for n in roles:
        state.apply_command(k.K8sNodeReport(n, "active", "", 0.0))
    state.apply_command(k.K8sSetPhase(k.READY, {}, 0.0))
    if skipped_outside:
        outside = names[members:]
        half = len(outside) // 2
        state.apply_command(c.UpdateNode(outside[:half], "DRAIN", "bench", 0.0))
        state.apply_command(c.UpdateNode(outside[half:], "DOWN", "bench", 0.0))
    return state


def sweep_states(state: ClusterState) -> dict[str, str]:
    return DriftSweep(state=state, call_agent=None, tracker=None, correction=None,  # type: ignore[arg-type]
                      confirm_leader=None, term=None)._node_states()  # type: ignore[arg-type]


def decision_cost(ticks: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds of this thread) per tick."""
    state = build(10_000, 1_000, scoped=True, skipped_outside=True)
    # 50 strays: registered nodes outside the cluster, idle, running a spurd worker
    for i in range(50):
        state.apply_command(c.RegisterNode(Node(name=f"s{i:03d}", address="127.0.0.1"), 0.0))
    rec = state.domains["k8s_cluster"].record
    tracker = DriftTracker()
    ok, stray = Reading(True, "worker", True), Reading(True, "worker", True)
    costs, cpu = [], []
    for tick in range(ticks):
        now = tick * 30.0
        began, began_cpu = time.perf_counter(), time.thread_time()
        states = sweep_states(state)
        names = tracker.plan_reads(rec, states, now)
        for name in names:
            tracker.observe(rec, name, stray if name.startswith("s") else ok, now)
        decision = tracker.choose_stop(rec, now, True)
        if decision is not None:
            tracker.stopped(decision.node, now)
        costs.append(time.perf_counter() - began)
        cpu.append(time.thread_time() - began_cpu)
    return costs, cpu


def cpu_share_hour() -> tuple[float, int]:
    state = build(5_000, 5_000, scoped=False, skipped_outside=False)
    reads = 0

    async def agent(node: str, method: str, request: object, timeout: float) -> k0s_pb2.K0sStatus:
        nonlocal reads
        reads += 1
        return k0s_pb2.K0sStatus(component_state="active", role="worker", running=True,
                                 running_role="worker", claimed=True)

    async def noop() -> None:
        return None

    sweep = DriftSweep(state=state, call_agent=agent, tracker=DriftTracker(), correction=lambda: True,
                       confirm_leader=noop, term=lambda: 1)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(sweep.run)
            await trio.sleep(3600.0)
            nursery.cancel_scope.cancel()

    began = time.process_time()
    trio.run(main, clock=MockClock(autojump_threshold=0))
    return time.process_time() - began, reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    costs, cpu = decision_cost(args.ticks)
    for what, values in (("wall", costs), ("CPU", cpu)):
        ms = sorted(x * 1000 for x in values)
        print(f"decision cost per tick ({what}), 10,000 nodes / 1,000 candidates "
              f"({args.ticks} ticks): median {statistics.median(ms):.2f} ms, "
              f"p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms, max {ms[-1]:.2f} ms (target < 5 ms)")
    cpu, reads = cpu_share_hour()
    print(f"simulated hour, 5,000-node ready cluster: {reads} reads, sweep CPU {cpu:.2f} s "
          f"= {cpu / 3600 * 100:.3f} % of one core (in-process agents; RPC cost not included)")


if __name__ == "__main__":
    main()
