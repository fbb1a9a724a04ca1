"""The leader's drift sweep: a thin Trio loop around :class:`spur.k8s.cluster.drift.DriftTracker`.

Every ``limits.tick`` seconds (30 s; on Trio's clock, so MockClock drives it) it asks the tracker
which nodes to read, asks their agents for their k0s state (``K0sAgent.Status``), feeds the answers
back, logs each confirmed disagreement once (a warning naming the node and the roles) and counts it
on ``spur_k8s_drift_detected_total{kind}``, and performs at most one stray stop:

- just before the stop, a quorum round (``confirm_leader``, the Raft read barrier) confirms this
  controller still leads, and the Raft term must equal the one of the tick's decision;
- the cluster record and the node's Slurm state are re-read and the node's agent is asked again (this
  re-read belongs to the stop: a tick makes at most 16 sweep reads plus it); any change (or an answer
  that is no longer a stoppable stray) abandons the stop;
- the stop is the agent's ``Stop`` (stop + disable spurd's unit; never ``k0s reset``).

Stops confirmed by two stopped readings count on ``spur_k8s_stray_stops_total``; units that come
back on ``spur_k8s_stray_returns_total``. ``correction()`` is read on every tick (``[cluster]
k8s_drift_correction``, live on ``scontrol reconfigure``). The task runs in the leader-duties
nursery (cancelled on step-down); the tracker is kept on the controller across leaderships so the
stop limits survive a flip, and its readings start over at every new leadership.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from spur.k8s.cluster.drift import DriftTracker, Limits, Observed, Reading, StopDecision, classify
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError
from spur.state import k8s_cluster as k

if TYPE_CHECKING:
    from spur.config import SpurConfig
    from spur.k8s.cluster.task import AgentCaller
    from spur.state.machine import ClusterState

log = logging.getLogger("spur.k8s.drift")

READ_TIMEOUT = 10.0
STOP_TIMEOUT = 120.0


def reading_of(st: k0s_pb2.K0sStatus) -> Reading:
    """A K0sStatus answer as a :class:`Reading` (an older agent sends neither running nor claimed)."""
    running = bool(st.running) or st.component_state in ("active", "starting", "activating")
    return Reading(running=running, role=st.running_role or (st.role if running else ""), claimed=bool(st.claimed))


class DriftMetrics(Protocol):
    """What the sweep counts (``spur.metrics.k8s.K8sMetrics``, which sits above this package)."""

    def drift_detected(self, kind: str) -> None: ...

    def stray_stop(self) -> None: ...

    def stray_return(self) -> None: ...


class _Term(Protocol):
    @property
    def term(self) -> int: ...


class DriftHost(Protocol):
    """What the drift duty uses of spurctld's controller: the state it sweeps, the live
    ``[cluster]`` setting, the Raft read barrier and term, and the tracker it keeps across
    leaderships."""

    @property
    def state(self) -> ClusterState: ...

    @property
    def cfg(self) -> SpurConfig: ...

    @property
    def raft(self) -> _Term: ...

    async def read_barrier(self) -> None: ...

    k8s_drift: DriftTracker | None


class DriftSweep:
    """See the module docstring. ``call_agent(node, method, request, timeout)`` calls a node's
    K0sAgent; ``term()`` is the current Raft term; ``now`` is Trio's clock."""

    def __init__(
        self,
        *,
        state: ClusterState,
        call_agent: Callable[[str, str, Any, float], Awaitable[Any]],
        tracker: DriftTracker,
        correction: Callable[[], bool],
        confirm_leader: Callable[[], Awaitable[None]],
        term: Callable[[], int],
        now: Callable[[], float] = trio.current_time,
        metrics: DriftMetrics | None = None,
    ) -> None:
        self.state = state
        self.call_agent = call_agent
        self.tracker = tracker
        self.correction = correction
        self.confirm_leader = confirm_leader
        self.term = term
        self.now = now
        self.metrics = metrics
        self.ticks = 0

    @property
    def record(self) -> k.K8sClusterRecord:
        return self.state.domain(k.K8sClusterDomain).record

    def _node_states(self) -> dict[str, str]:
        """What the candidates rule needs of each registered node's state, cheaply (no usage
        lookup: draining and drained are both skipped, so a drain flag reads as drained)."""
        return {
            name: "down" if node.down else "drained" if node.drain else "up"
            for name, node in self.state.nodes.items()
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Tick forever at a fixed cadence (an overrunning tick skips the ticks it overran)."""
        self.tracker.reset_readings()  # a new leadership: readings start over
        task_status.started()
        tick = self.tracker.limits.tick
        next_at = self.now()
        while True:
            try:
                await self.tick()
            except RpcError as exc:  # leadership lost mid-tick: the duty is about to be cancelled
                log.info("k8s drift sweep tick stopped: %s", exc)
            except Exception:  # a bug must not take spurctld down; the next tick starts afresh
                log.exception("k8s drift sweep tick failed")
            next_at += tick
            now = self.now()
            while next_at <= now:
                next_at += tick
            await trio.sleep_until(next_at)

    async def _read(self, node: str) -> Reading | None:
        try:
            st = await self.call_agent(node, "Status", k0s_pb2.K0sStatusRequest(), READ_TIMEOUT)
        except (RpcError, OSError) as exc:
            log.debug("k8s drift: %s did not answer: %s", node, getattr(exc, "message", exc))
            return None
        return reading_of(st)

    async def tick(self) -> None:
        """One pass: read the due nodes, report, maybe stop one stray."""
        self.ticks += 1
        term = self.term()
        now = self.now()
        names = self.tracker.plan_reads(self.record, self._node_states(), now)
        readings: dict[str, Reading | None] = {}

        async def one(name: str) -> None:
            readings[name] = await self._read(name)

        if names:
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(one, name)
        rec = self.record
        for name in names:
            reading = readings.get(name)
            if reading is None:
                self.tracker.unreachable(name, now)
                continue
            self._emit(name, self.tracker.observe(rec, name, reading, now))
        decision = self.tracker.choose_stop(rec, now, self.correction())
        if decision is not None:
            await self._stop(decision, term, now)

    def _emit(self, name: str, obs: Observed) -> None:
        if obs.report is not None:
            d = obs.report.drift
            log.warning(
                "k8s drift on %s: %s (recorded role: %s; running: %s)%s",
                name, d.kind, d.recorded or "none", d.running or "nothing",
                "; a stray this controller may stop" if d.stoppable else "; reported only",
            )
            if self.metrics is not None:
                self.metrics.drift_detected(d.kind)
        if obs.stop_done:
            log.info("k8s drift: the stray k0s on %s stayed stopped (two checks)", name)
            if self.metrics is not None:
                self.metrics.stray_stop()
        if obs.returned:
            nxt = self.tracker.next_stop_at(name)
            log.warning(
                "k8s drift: the stray k0s on %s came back after a stop; next stop not before %.0fs from now",
                name, (nxt or self.now()) - self.now(),
            )
            if self.metrics is not None:
                self.metrics.stray_return()

    def _fingerprint(self, name: str) -> tuple:
        rec = self.record
        node = rec.nodes.get(name)
        node_info = self.state.nodes.get(name)
        state = "unknown" if node_info is None else (node_info.down, node_info.drain)
        return (
            rec.phase, rec.phase_since, rec.scoped, name in rec.members, len(rec.members),
            None if node is None else (node.role, node.removing), state,
        )

    async def _stop(self, decision: StopDecision, term: int, now: float) -> None:
        name = decision.node
        before = self._fingerprint(name)
        await self.confirm_leader()  # quorum round; raises when no longer leader
        if self.term() != term:
            log.info("k8s drift: not stopping %s: an election happened since the decision", name)
            return
        reading = await self._read(name)
        if self._fingerprint(name) != before:
            log.info("k8s drift: not stopping %s: the node or the cluster record changed", name)
            return
        again = classify(self.record, name, reading) if reading is not None else None
        if again is None or not again.stoppable:
            log.info("k8s drift: not stopping %s: its agent no longer reports a stray worker", name)
            if reading is not None:  # a reading like any other: the stray is out of view until confirmed again
                self._emit(name, self.tracker.observe(self.record, name, reading, now))
            return
        log.warning(
            "k8s drift: stopping the stray k0s %s on %s (outside the scoped cluster, no role recorded; "
            "stop %d of this node)", again.running, name, self.tracker.track(name).stops + 1,
        )
        try:
            await self.call_agent(name, "Stop", k0s_pb2.K0sStopRequest(), STOP_TIMEOUT)
        except (RpcError, OSError) as exc:
            log.warning("k8s drift: stopping k0s on %s failed: %s", name, getattr(exc, "message", exc))
            self.tracker.stopped(name, now, sent=False)
            return
        self.tracker.stopped(name, now)


#: Test-only: a JSON object of :class:`spur.k8s.cluster.drift.Limits` fields (integration tests
#: shrink the 30-second tick instead of sleeping through it).
LIMITS_ENV = "SPUR_TEST_K8S_DRIFT_LIMITS"


def limits_from_env(environ: Mapping[str, str] | None = None) -> Limits:
    """The sweep's limits: the contract's numbers, or the test override of :data:`LIMITS_ENV`."""
    import json
    import os

    raw = (os.environ if environ is None else environ).get(LIMITS_ENV, "")
    if not raw:
        return Limits()
    return Limits(**json.loads(raw))


async def drift_duty(
    ctl: DriftHost, call_agent: AgentCaller, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Leader duty (beside the reconciler): the drift sweep. The tracker lives on ``ctl`` so stop
    limits and backoffs survive a leadership flip within this spurctld."""
    tracker = getattr(ctl, "k8s_drift", None)
    if tracker is None:
        tracker = DriftTracker(limits=limits_from_env())
        ctl.k8s_drift = tracker
    sweep = DriftSweep(
        state=ctl.state,
        call_agent=call_agent,
        tracker=tracker,
        correction=lambda: bool(ctl.cfg.cluster.k8s_drift_correction),
        confirm_leader=ctl.read_barrier,
        term=lambda: ctl.raft.term,
        metrics=getattr(getattr(ctl, "metrics", None), "k8s", None),
    )
    await sweep.run(task_status=task_status)
