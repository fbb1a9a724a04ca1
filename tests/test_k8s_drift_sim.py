"""The drift sweep on a simulated fleet under Trio's MockClock (autojump): the real replicated state
(ClusterState with registered nodes and a scoped k0s cluster record), the real sweep task and
tracker, and in-process agents answering K0sAgent Status/Stop. Simulated hours run in seconds."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

import trio
from trio.testing import MockClock

from spur.core.job import Node
from spur.k8s.cluster.drift import DriftTracker, backoff, sweep_period
from spur.k8s.cluster.drift_task import DriftSweep
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state import k8s_cluster as k
from spur.state.machine import ClusterState

HOUR = 3600.0


@dataclass
class Unit:
    """One node's k0s as its agent reports it."""

    running: bool = False
    role: str = ""
    claimed: bool = True
    comes_back_after: float | None = None  # a flapping unit restarts this long after a stop
    stopped_at: float | None = None


class Fleet:
    """In-process agents: Status answers from ``units``; Stop stops (and maybe later restarts) one."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.units: dict[str, Unit] = {}
        self.reads: list[tuple[float, str]] = []
        self.stops: list[tuple[float, str]] = []
        self.unreachable: set[str] = set()

    def unit(self, name: str) -> Unit:
        return self.units.setdefault(name, Unit())

    async def call(self, node: str, method: str, request: object, timeout: float) -> k0s_pb2.K0sStatus:
        now = trio.current_time()
        if node in self.unreachable:
            raise RpcError(StatusCode.UNAVAILABLE, f"cannot reach the agent of {node}")
        u = self.unit(node)
        if u.stopped_at is not None and u.comes_back_after is not None and now - u.stopped_at >= u.comes_back_after:
            u.running, u.stopped_at = True, None
        if method == "Stop":
            self.stops.append((now, node))
            u.running, u.stopped_at = False, now
        elif method == "Status":
            self.reads.append((now, node))
        else:
            raise AssertionError(method)
        return k0s_pb2.K0sStatus(
            component_state="active" if u.running else "inactive", role=u.role if u.running else "",
            running=u.running, running_role=u.role if u.running else "", claimed=u.claimed,
        )


class Leader:
    """The controller's leadership as the sweep sees it: a term and a quorum round."""

    def __init__(self) -> None:
        self.term = 1
        self.confirms: list[float] = []
        self.elect_during_confirm = False

    async def confirm(self) -> None:
        self.confirms.append(trio.current_time())
        if self.elect_during_confirm:
            self.term += 1


def make_state(n_nodes: int, members: int) -> ClusterState:
    """``n_nodes`` registered nodes n000..; a ready scoped cluster of the first ``members`` (n000 is
    the controller, the rest workers)."""
    state = ClusterState()
    names = [f"n{i:03d}" for i in range(n_nodes)]
    for name in names:
        state.apply_command(c.RegisterNode(Node(name=name, address="127.0.0.1"), 0.0))
    roles = {n: ("controller" if i == 0 else "worker") for i, n in enumerate(names[:members])}
    state.apply_command(k.K8sUp(True, list(roles), ["n000"], roles, {}, {}, 0.0))
    for n in roles:
        state.apply_command(k.K8sNodeReport(n, "active", "", 0.0))
    state.apply_command(k.K8sSetPhase(k.READY, {}, 0.0))
    return state


class Sim:
    def __init__(self, n_nodes: int = 200, members: int = 150, correction: bool = True) -> None:
        self.state = make_state(n_nodes, members)
        self.fleet = Fleet(self.state)
        self.leader = Leader()
        self.correction = correction
        self.tracker = DriftTracker()
        self.reports: list[tuple[float, str, str]] = []
        self.done: list[tuple[float, str]] = []
        self.returns: list[tuple[float, str]] = []
        for i in range(members):  # every member runs its recorded role
            u = self.fleet.unit(f"n{i:03d}")
            u.running, u.role = True, "controller" if i == 0 else "worker"

    def sweep(self) -> DriftSweep:
        sim = self

        class Metrics:
            def drift_detected(self, kind: str) -> None:
                pass

            def stray_stop(self) -> None:
                pass

            def stray_return(self) -> None:
                pass

        sweep = DriftSweep(
            state=self.state, call_agent=self.fleet.call, tracker=self.tracker,
            correction=lambda: sim.correction, confirm_leader=self.leader.confirm,
            term=lambda: sim.leader.term, metrics=Metrics(),
        )
        emit = sweep._emit

        def record(name, obs):  # what the log and the counters saw
            now = trio.current_time()
            if obs.report:
                self.reports.append((now, name, obs.report.drift.kind))
            if obs.stop_done:
                self.done.append((now, name))
            if obs.returned:
                self.returns.append((now, name))
            emit(name, obs)

        sweep._emit = record
        return sweep

    def stray(self, name: str, role: str = "worker", claimed: bool = True, comes_back_after: float | None = None):
        u = self.fleet.unit(name)
        u.running, u.role, u.claimed, u.comes_back_after = True, role, claimed, comes_back_after

    async def run_for(self, seconds: float, sweep: DriftSweep | None = None) -> DriftSweep:
        sweep = sweep or self.sweep()
        async with trio.open_nursery() as nursery:
            await nursery.start(sweep.run)
            await trio.sleep(seconds)
            nursery.cancel_scope.cancel()
        return sweep


def run(fn) -> None:
    trio.run(fn, clock=MockClock(autojump_threshold=0))


def per_tick(events: list[tuple[float, str]]) -> Counter:
    return Counter(math.floor(t / 30.0 + 1e-9) for t, _ in events)


# --------------------------------------------------------------------------- cadence


def test_exact_sweep_period_on_a_200_node_scoped_inventory():
    sim = Sim(correction=False)
    for name in ("n170", "n171"):
        sim.state.apply_command(c.UpdateNode([name], "DOWN" if name == "n170" else "DRAIN", "test", 0.0))

    async def main():
        await sim.run_for(2 * HOUR)

    run(main)
    reads: dict[str, list[float]] = {}
    for t, n in sim.fleet.reads:
        reads.setdefault(n, []).append(t)
    assert "n170" not in reads and "n171" not in reads  # down, drained: skipped
    assert len(reads) == 198
    assert max(per_tick(sim.fleet.reads).values()) == 16
    for name, times in reads.items():
        gaps = {round(b - a, 6) for a, b in pairwise(times)}
        assert gaps == {600.0}, (name, gaps)  # ten minutes, exactly
    # everyone was read within the first sweep: ceil(198 / 16) = 13 ticks
    assert max(times[0] for times in reads.values()) == 12 * 30


def test_large_scoped_inventory_sweeps_in_ceil_candidates_over_16_ticks():
    sim = Sim(n_nodes=400, members=100, correction=False)

    async def main():
        await sim.run_for(2 * HOUR)

    run(main)
    assert sweep_period(400) == 750
    times = [t for t, n in sim.fleet.reads if n == "n399"]
    assert {round(b - a, 6) for a, b in pairwise(times)} == {750.0}
    assert max(per_tick(sim.fleet.reads).values()) == 16


# --------------------------------------------------------------------------- reports and stops


def test_fleet_with_strays_mismatches_flapping_down_and_drained_nodes():
    sim = Sim()
    for name in ("n150", "n151", "n152"):
        sim.stray(name)  # left behind: stopped, one per tick
    sim.stray("n153", role="controller")  # outside, controller: reported only
    sim.stray("n154", claimed=False)  # k0s install's unit: reported only
    sim.stray("n155", comes_back_after=100.0)  # flaps: comes back after every stop
    sim.fleet.unit("n010").role = "controller"  # role_mismatch
    sim.fleet.unit("n011").role = "controller"
    sim.stray("n160")
    sim.state.apply_command(c.UpdateNode(["n160"], "DOWN", "test", 0.0))  # down: never read or stopped
    sim.stray("n161")
    sim.state.apply_command(c.UpdateNode(["n161"], "DRAIN", "test", 0.0))

    async def main():
        await sim.run_for(4 * HOUR)

    run(main)
    kinds = Counter((n, kind) for _, n, kind in sim.reports)
    assert kinds == {
        ("n150", "out_of_scope"): 1, ("n151", "out_of_scope"): 1, ("n152", "out_of_scope"): 1,
        ("n153", "out_of_scope"): 1, ("n154", "out_of_scope"): 1, ("n155", "out_of_scope"): 1,
        ("n010", "role_mismatch"): 1, ("n011", "role_mismatch"): 1,
    }, "each disagreement reported once"
    # reports come with the second reading, ten minutes after the first
    first_read = {n: min(t for t, m in sim.fleet.reads if m == n) for n in ("n150", "n010")}
    for t, n, _ in sim.reports:
        if n in first_read:
            assert t == first_read[n] + 600
    stopped = Counter(n for _, n in sim.fleet.stops)
    assert set(stopped) == {"n150", "n151", "n152", "n155"}
    assert stopped["n150"] == stopped["n151"] == stopped["n152"] == 1
    assert sim.fleet.units["n153"].running and sim.fleet.units["n154"].running  # left alone
    assert max(per_tick(sim.fleet.stops).values()) == 1
    # sweep reads stay within 16 a tick; the re-read right before a stop is the stop's own
    reads, confirms = per_tick(sim.fleet.reads), per_tick([(t, "") for t in sim.leader.confirms])
    assert max(reads[tick] - confirms[tick] for tick in reads) == 16
    assert max(reads.values()) <= 17
    times = [t for t, _ in sim.fleet.stops]
    assert all(sum(1 for u in times if t - 600 < u <= t) <= 5 for t in times)
    assert {n for _, n in sim.done} == {"n150", "n151", "n152"}
    # the flapping unit: every stop returns; the wait doubles from ten minutes to an hour
    flaps = [t for t, n in sim.fleet.stops if n == "n155"]
    assert len(flaps) >= 5
    waits = [b - a for a, b in pairwise(flaps)]
    assert all(w >= backoff(i + 1) for i, w in enumerate(waits)), waits
    # the first return is seen on the 10-minute sweep and must be confirmed again (two readings), so
    # the first wait is longer than 600 s; from then on the backoff itself is what holds the stop
    assert waits[0] >= 600 and waits[1:5] == [1200, 2400, 3600, 3600], waits
    assert sim.tracker.tracks["n155"].returns == len(sim.returns) >= len(flaps) - 1
    assert {n for _, n in sim.returns} == {"n155"}
    assert sim.tracker.tracks["n155"].done == 0
    assert waits[-1] >= 3600


def hold_back_sim(role_nodes: int, strays: int) -> Sim:
    """``role_nodes`` cluster nodes and ``strays`` left-behind workers a00.. (read first, so all of
    them are in view together), plus three idle nodes outside the cluster."""
    sim = Sim(n_nodes=role_nodes + 3, members=role_nodes)
    for i in range(strays):
        sim.state.apply_command(c.RegisterNode(Node(name=f"a{i:02d}", address="127.0.0.1"), 0.0))
        sim.stray(f"a{i:02d}")
    return sim


def test_hold_back_threshold_3_4_25_percent():
    outcomes = {}
    for role_nodes, strays in ((1, 3), (11, 4), (12, 4), (14, 5), (15, 5)):
        sim = hold_back_sim(role_nodes, strays)

        async def main(sim=sim):
            await sim.run_for(HOUR)

        run(main)
        outcomes[(role_nodes, strays)] = len(sim.fleet.stops)
    assert outcomes[(1, 3)] == 3  # three strays on a one-node cluster: always let through, one per tick
    assert outcomes[(11, 4)] == 0  # 4 > 3 and 4 > 25 % of 15 compared: held back
    assert outcomes[(12, 4)] == 4  # 4 is not more than 25 % of 16
    assert outcomes[(14, 5)] == 0  # 5 > 25 % of 19
    assert outcomes[(15, 5)] == 5  # 5 of 20 is exactly a quarter, not more: they go


def test_at_most_five_stops_per_ten_minutes_and_one_per_tick_with_many_strays():
    sim = Sim(n_nodes=200, members=180)  # 180 role nodes + 20 strays: 20 < 25 % of 200 -> not held
    for i in range(180, 200):
        sim.stray(f"n{i:03d}")

    async def main():
        await sim.run_for(2 * HOUR)

    run(main)
    times = [t for t, _ in sim.fleet.stops]
    assert len(times) == 20
    assert max(per_tick(sim.fleet.stops).values()) == 1
    assert max(sum(1 for u in times if t - 600 < u <= t) for t in times) == 5


# --------------------------------------------------------------------------- leadership, restart, reload


def test_leader_change_mid_sweep_starts_readings_over_and_keeps_the_limits():
    sim = Sim()
    sim.stray("n150")
    sim.stray("n153", role="controller")

    async def main():
        await sim.run_for(300.0)  # n150/n153 read once (first sweep: 13 ticks), not yet confirmed
        assert not sim.reports
        sim.leader.term += 1  # a new leadership in this controller: same tracker, readings over
        await sim.run_for(HOUR)

    run(main)
    first = {n: min(t for t, m in sim.fleet.reads if m == n) for n in ("n150",)}
    assert Counter(n for _, n, _ in sim.reports) == {"n150": 1, "n153": 1}
    # the reading before the flip does not count: the report needs two readings of the new leadership
    report_at = next(t for t, n, _ in sim.reports if n == "n150")
    assert report_at > first["n150"] + 600
    assert [n for _, n in sim.fleet.stops] == ["n150"]


def test_election_between_decision_and_stop_abandons_the_stop():
    sim = Sim()
    sim.stray("n150")
    sim.leader.elect_during_confirm = True

    async def main():
        await sim.run_for(HOUR)

    run(main)
    assert sim.leader.confirms and not sim.fleet.stops


def test_record_change_between_decision_and_stop_abandons_it():
    sim = Sim()
    sim.stray("n150")

    async def confirm():  # the node joins the cluster while the quorum round runs
        sim.leader.confirms.append(trio.current_time())
        if "n150" not in sim.state.domains["k8s_cluster"].record.nodes:
            sim.state.apply_command(k.K8sAddNodes({"n150": "worker"}, {}, {}, 0.0))

    sim.leader.confirm = confirm

    async def main():
        await sim.run_for(HOUR)

    run(main)
    assert len(sim.leader.confirms) == 1 and not sim.fleet.stops


def test_node_that_changed_between_decision_and_stop_is_left_alone():
    sim = Sim()
    sim.stray("n150")

    async def confirm():  # the unit goes away by itself while the quorum round runs
        sim.leader.confirms.append(trio.current_time())
        sim.fleet.units["n150"].running = False

    sim.leader.confirm = confirm

    async def main():
        await sim.run_for(HOUR)

    run(main)
    assert len(sim.leader.confirms) == 1 and not sim.fleet.stops
    assert sim.tracker.tracks["n150"].stops == 0


def test_remove_nodes_during_a_leader_change_surfaces_at_most_one_out_of_scope():
    sim = Sim()

    async def main():
        await sim.run_for(900.0)
        sim.state.apply_command(k.K8sForgetNode("n020", forget=False, time=0.0))  # draining: skipped
        sim.leader.term += 1
        sweep = sim.sweep()
        async with trio.open_nursery() as nursery:
            await nursery.start(sweep.run)
            await trio.sleep(700.0)
            sim.state.apply_command(k.K8sForgetNode("n020", forget=True, time=0.0))  # forgotten, k0s still up
            await trio.sleep(1300.0)
            sim.fleet.units["n020"].running = False  # the reset finally lands
            await trio.sleep(HOUR)
            nursery.cancel_scope.cancel()

    run(main)
    assert sum(1 for _, n, _ in sim.reports if n == "n020") <= 1


def test_restart_forgets_readings_and_reports_again():
    sim = Sim(correction=False)
    sim.stray("n150")

    async def main():
        await sim.run_for(HOUR)
        sim.tracker = DriftTracker()  # a restarted spurctld
        await sim.run_for(HOUR)

    run(main)
    assert [n for _, n, _ in sim.reports] == ["n150", "n150"]
    assert not sim.fleet.stops


def test_config_reload_turns_correction_on_without_restart():
    sim = Sim(correction=False)
    sim.stray("n150")

    async def main():
        sweep = sim.sweep()
        async with trio.open_nursery() as nursery:
            await nursery.start(sweep.run)
            await trio.sleep(HOUR)
            assert not sim.fleet.stops and [n for _, n, _ in sim.reports] == ["n150"]  # report-only
            sim.correction = True  # scontrol reconfigure: the same task reads the flag on its next tick
            await trio.sleep(31.0)
            assert [n for _, n in sim.fleet.stops] == ["n150"]
            sim.correction = False
            sim.fleet.units["n150"].running = True  # comes back: reported, not stopped again
            await trio.sleep(HOUR)
            nursery.cancel_scope.cancel()

    run(main)
    assert [n for _, n in sim.fleet.stops] == ["n150"]
    assert sim.tracker.tracks["n150"].returns == 1
