"""Membership drift and stray correction: the leader's decisions, pure (no I/O; time passed in).

The sweep task (:mod:`spur.k8s.cluster.drift_task`) feeds a :class:`DriftTracker` with the cluster
record, the Slurm-style state of every registered node and what each node's agent answered; the
tracker says which nodes to read, which disagreements to report and which stray to stop. Numbered
rules (each has a unit test named after it in tests/test_k8s_drift_logic.py):

1. *Candidates*: while the cluster is ready or degraded, every node with a role, plus (scoped
   cluster) every registered node outside the members. Skipped: nodes down, drained, draining, in
   error, suspended or in an unknown state (not registered), and nodes being taken out by
   ``spur k8s remove-nodes``. Nothing is read in any other phase.
2. *Sweep cadence*: at most ``reads_per_tick`` (16) reads per ``tick`` (30 s); a node is due again
   ``sweep_period`` after its last reading: ten minutes, or ceil(candidates / 16) x 30 s when that is
   longer. Never-read nodes go first, then the longest-unread (a node joining behind the sweep may
   wait one extra sweep).
3. *Kinds*: ``out_of_scope`` (k0s running on a node outside a scoped cluster's members; never for a
   whole-inventory cluster), ``role_mismatch`` (the running role differs from the recorded one; a
   recorded ``single`` running ``controller`` is not a mismatch), ``not_running`` (degraded clusters
   only: a node running when the cluster degraded that no longer runs; "running when it degraded" is
   the record's ``active`` nodes as this tracker first sees the degraded phase, so a leader that
   takes over a degraded cluster compares with the nodes running at its takeover).
4. *Report once*: a disagreement is reported when two successive readings of the node agree on it,
   once per episode (an episode ends with a reading that agrees with the record, or a different
   disagreement). Readings start over when a node stops being a candidate, when the cluster leaves
   ready/degraded (:meth:`DriftTracker.cluster_inactive`), and on controller restart or leadership
   change (:meth:`DriftTracker.reset_readings`; a fresh tracker on restart).
5. *Stoppable*: only a confirmed out_of_scope reading of a spurd-claimed k0s *worker* on a node
   outside a scoped cluster with no role recorded. Everything else is reported only.
6. *Rate limits*: at most one stop per tick, at most ``stops_per_window`` (5) per rolling
   ``window`` (10 min).
7. *Hold-back*: no stop at all while more than ``hold_min`` (3) stoppable strays are in view AND they
   outnumber ``hold_fraction`` (a quarter) of the nodes compared (nodes with a role + nodes outside
   the cluster whose last reading found k0s running).
8. *Per-node backoff*: after a stop a node waits ``backoff_first`` (10 min) before another, doubling
   per stop up to ``backoff_max`` (1 h).
9. *Done / returns*: a stop is done when the next two readings find the unit stopped; a reading that
   finds it running again after a stop is a return (counted separately; the backoff keeps growing).
10. *Report-only*: with ``[cluster] k8s_drift_correction = false`` nothing is stopped (the flag is
    passed to :meth:`DriftTracker.choose_stop` on every tick, so a reload takes effect at once).

Stop history (rate window, per-node backoff, returns) survives :meth:`DriftTracker.reset_readings`
so a leadership flip inside one spurctld cannot reset the limits; a restarted spurctld starts afresh.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spur.state.k8s_cluster import DEGRADED, READY, K8sClusterRecord

OUT_OF_SCOPE, ROLE_MISMATCH, NOT_RUNNING = "out_of_scope", "role_mismatch", "not_running"
KINDS = (OUT_OF_SCOPE, ROLE_MISMATCH, NOT_RUNNING)
#: Node states (``ClusterState.node_state`` plus error/suspended/unknown) whose nodes are not read.
SKIPPED_STATES = frozenset({"down", "drained", "draining", "error", "suspended", "unknown"})
ACTIVE_PHASES = (READY, DEGRADED)


@dataclass(frozen=True)
class Limits:
    """The numbers of the contract. Only tests shrink them."""

    tick: float = 30.0
    reads_per_tick: int = 16
    sweep_min: float = 600.0
    stops_per_window: int = 5
    window: float = 600.0
    hold_min: int = 3
    hold_fraction: float = 0.25
    backoff_first: float = 600.0
    backoff_max: float = 3600.0
    checks_to_confirm_stop: int = 2


@dataclass(frozen=True)
class Reading:
    """What a node's agent said about k0s. ``claimed``: the running unit is spurd's own (its marker;
    an older agent never claims)."""

    running: bool
    role: str = ""
    claimed: bool = False


@dataclass(frozen=True)
class Drift:
    """One disagreement between the record and a reading."""

    kind: str
    recorded: str  # recorded role ("" = none)
    running: str  # role the node runs ("" = not running / unknown)
    stoppable: bool = False

    def describe(self) -> str:
        rec = self.recorded or "no role"
        if self.kind == NOT_RUNNING:
            return f"{NOT_RUNNING}: recorded {rec}, k0s no longer runs"
        return f"{self.kind}: recorded {rec}, running {self.running or 'k0s'}"


# --------------------------------------------------------------------------- rule 1 / 2


def candidates(rec: K8sClusterRecord, node_states: Mapping[str, str]) -> list[str]:
    """Rule 1: the nodes the sweep checks, sorted. ``node_states``: registered node -> its state."""
    if rec.phase not in ACTIVE_PHASES:
        return []
    usable = {n for n, st in node_states.items() if st not in SKIPPED_STATES}  # unregistered: unknown
    names = usable.intersection(rec.nodes)
    if rec.scoped:
        names |= usable.difference(rec.members)
    names.difference_update(n for n, node in rec.nodes.items() if node.removing)
    return sorted(names)


def sweep_period(n_candidates: int, limits: Limits = Limits()) -> float:
    """Rule 2: how long a node waits between readings."""
    ticks = math.ceil(n_candidates / limits.reads_per_tick) if n_candidates else 0
    return max(limits.sweep_min, ticks * limits.tick)


def due_reads(
    names: Iterable[str], last_read: Mapping[str, float], now: float, limits: Limits = Limits()
) -> list[str]:
    """Rule 2: the nodes to read this tick (never-read first, then longest-unread; at most
    ``reads_per_tick``)."""
    names = list(names)
    period = sweep_period(len(names), limits)
    due = [n for n in names if n not in last_read or now - last_read[n] >= period - 1e-6]
    due.sort(key=lambda n: (last_read.get(n, -math.inf), n))
    return due[: limits.reads_per_tick]


# --------------------------------------------------------------------------- rule 3 / 5


def classify(rec: K8sClusterRecord, name: str, reading: Reading, ran_at_degrade: bool = True) -> Drift | None:
    """Rules 3 and 5: the disagreement in ``reading`` of node ``name`` (None when it agrees)."""
    node = rec.nodes.get(name)
    recorded = node.role if node is not None else ""
    outside = rec.scoped and name not in set(rec.members)
    if outside:
        if not reading.running:
            return None
        stoppable = node is None and reading.role == "worker" and reading.claimed
        return Drift(OUT_OF_SCOPE, recorded, reading.role, stoppable)
    if node is None:  # whole inventory: not enrolled yet (not a candidate)
        return None
    if reading.running:
        if reading.role and reading.role != recorded and not (recorded == "single" and reading.role == "controller"):
            return Drift(ROLE_MISMATCH, recorded, reading.role)
        return None
    if rec.phase == DEGRADED and ran_at_degrade:
        return Drift(NOT_RUNNING, recorded, "")
    return None


# --------------------------------------------------------------------------- rules 6-8


def backoff(stops: int, limits: Limits = Limits()) -> float:
    """Rule 8: the wait after a node's ``stops``-th stop (1-based)."""
    if stops <= 0:
        return 0.0
    return min(limits.backoff_max, limits.backoff_first * 2 ** (stops - 1))


def held_back(stoppable: int, compared: int, limits: Limits = Limits()) -> bool:
    """Rule 7: hold back every stop while more than ``hold_min`` strays are stoppable and they
    outnumber ``hold_fraction`` of the nodes compared."""
    return stoppable > limits.hold_min and stoppable > limits.hold_fraction * compared


def window_allows(stop_times: Iterable[float], now: float, limits: Limits = Limits()) -> bool:
    """Rule 6: fewer than ``stops_per_window`` stops in the rolling window ending now."""
    return sum(1 for t in stop_times if now - t < limits.window) < limits.stops_per_window


# --------------------------------------------------------------------------- the tracker


@dataclass
class NodeTrack:
    """What the tracker remembers of one node."""

    last_read: float | None = None
    last: Drift | None = None  # the disagreement of the last reading (None: agreed)
    confirmed: bool = False  # the last two readings agreed on ``last``
    reported: Drift | None = None  # the disagreement reported in the current episode
    running: bool = False  # the last reading found k0s running
    # stop history (kept across reset_readings)
    stops: int = 0  # stops sent
    done: int = 0  # stops confirmed by two stopped readings
    returns: int = 0
    last_stop: float | None = None
    verifying: int = 0  # stopped readings still needed to call the last stop done
    watching_return: bool = False  # a running reading now is a return

    def reset_readings(self) -> None:
        self.last_read = None
        self.last = None
        self.confirmed = False
        self.reported = None
        self.running = False


@dataclass(frozen=True)
class Report:
    node: str
    drift: Drift


@dataclass(frozen=True)
class Observed:
    """What one reading produced: a report to make, a stop now done, a return."""

    report: Report | None = None
    stop_done: bool = False
    returned: bool = False


@dataclass(frozen=True)
class StopDecision:
    node: str
    drift: Drift


@dataclass(frozen=True)
class Blocked:
    """Why no stop this tick although a stray is stoppable."""

    reason: str


@dataclass
class DriftTracker:
    limits: Limits = field(default_factory=Limits)
    tracks: dict[str, NodeTrack] = field(default_factory=dict)
    stop_times: deque[float] = field(default_factory=deque)
    last_tick_stop: float | None = None
    degraded_since: float | None = None
    ran_at_degrade: frozenset[str] = frozenset()
    blocked: str = ""  # why the last stoppable stray was not stopped (status)

    def track(self, name: str) -> NodeTrack:
        t = self.tracks.get(name)
        if t is None:
            t = self.tracks[name] = NodeTrack()
        return t

    # ------------------------------------------------------------ readings start over

    def reset_readings(self) -> None:
        """Rule 4: leadership change (or a reload of the task): every reading starts over."""
        for t in self.tracks.values():
            t.reset_readings()
        self.degraded_since = None

    def cluster_inactive(self) -> None:
        """Rule 4: the cluster left ready/degraded."""
        self.reset_readings()

    # ------------------------------------------------------------ per tick

    def plan_reads(self, rec: K8sClusterRecord, node_states: Mapping[str, str], now: float) -> list[str]:
        """Rules 1, 2, 4: the nodes to read now; nodes no longer candidates start over."""
        if rec.phase not in ACTIVE_PHASES:
            self.cluster_inactive()
            return []
        if rec.phase == DEGRADED and self.degraded_since != rec.phase_since:
            self.degraded_since = rec.phase_since
            self.ran_at_degrade = frozenset(n for n, node in rec.nodes.items() if node.component_state == "active")
        names = candidates(rec, node_states)
        current = set(names)
        for name, t in self.tracks.items():
            if name not in current and t.last_read is not None:
                t.reset_readings()
        last = {n: t.last_read for n, t in self.tracks.items() if t.last_read is not None}
        return due_reads(names, last, now, self.limits)

    def observe(self, rec: K8sClusterRecord, name: str, reading: Reading, now: float) -> Observed:
        """Rules 3, 4, 9: take one reading of ``name``."""
        t = self.track(name)
        t.last_read = now
        t.running = reading.running
        drift = classify(rec, name, reading, name in self.ran_at_degrade)
        stop_done = returned = False
        if t.verifying or t.watching_return:
            if reading.running:
                if t.watching_return:
                    t.returns += 1
                    returned = True
                t.verifying = 0
                t.watching_return = False
            elif t.verifying:
                t.verifying -= 1
                if t.verifying == 0:
                    t.done += 1
                    stop_done = True
        t.confirmed = drift is not None and drift == t.last
        t.last = drift
        report = None
        if drift is None:
            t.reported = None
        elif t.confirmed and t.reported != drift:
            t.reported = drift
            report = Report(name, drift)
        return Observed(report, stop_done, returned)

    def unreachable(self, name: str, now: float) -> None:
        """A node whose agent did not answer: no reading (its readings are kept), read again next sweep."""
        self.track(name).last_read = now

    def in_view(self, rec: K8sClusterRecord | None = None) -> list[str]:
        """Nodes whose last two readings confirm a stoppable stray (and, given the record, that are
        still outside the scoped cluster with no role)."""
        members = set(rec.members) if rec is not None else set()
        return sorted(
            n for n, t in self.tracks.items()
            if t.confirmed and t.last is not None and t.last.stoppable
            and (rec is None or (rec.scoped and n not in rec.nodes and n not in members))
        )

    def compared(self, rec: K8sClusterRecord) -> int:
        """Rule 7: nodes with a role + nodes outside the cluster whose last reading found k0s running."""
        members = set(rec.members) if rec.scoped else None
        outside_running = sum(
            1 for n, t in self.tracks.items()
            if t.running and n not in rec.nodes and (members is None or n not in members)
        )
        return len(rec.nodes) + outside_running

    def choose_stop(self, rec: K8sClusterRecord, now: float, correction: bool) -> StopDecision | None:
        """Rules 5-8 and 10: the stray to stop this tick, if any (call at most once per tick)."""
        strays = self.in_view(rec)
        self.blocked = ""
        if not strays or rec.phase not in ACTIVE_PHASES:
            return None
        if not correction:
            self.blocked = "report-only ([cluster] k8s_drift_correction = false)"
            return None
        if self.last_tick_stop is not None and now - self.last_tick_stop < self.limits.tick - 1e-6:
            self.blocked = "one stop per tick"
            return None
        compared = self.compared(rec)
        if held_back(len(strays), compared, self.limits):
            self.blocked = (
                f"held back: {len(strays)} stoppable strays of {compared} nodes compared "
                "(the record is more likely wrong than the fleet)"
            )
            return None
        while self.stop_times and now - self.stop_times[0] >= self.limits.window:
            self.stop_times.popleft()
        if not window_allows(self.stop_times, now, self.limits):
            self.blocked = f"{self.limits.stops_per_window} stops in the last {self.limits.window:g}s"
            return None
        ready = [
            n for n in strays
            if self.tracks[n].last_stop is None
            or now - self.tracks[n].last_stop >= backoff(self.tracks[n].stops, self.limits) - 1e-6  # type: ignore[operator]
        ]
        if not ready:
            self.blocked = "waiting out the per-node backoff"
            return None
        name = min(ready, key=lambda n: (self.tracks[n].stops, n))
        return StopDecision(name, self.tracks[name].last)  # type: ignore[arg-type]

    def stopped(self, name: str, now: float, sent: bool = True) -> None:
        """Rules 6, 8, 9: a stop of ``name`` was attempted now (``sent``: the agent accepted it; a
        failed attempt still counts against the limits and the backoff, but is not verified)."""
        t = self.track(name)
        t.stops += 1
        t.last_stop = now
        t.verifying = self.limits.checks_to_confirm_stop if sent else 0
        t.watching_return = sent
        t.last = None
        t.confirmed = False
        self.stop_times.append(now)
        self.last_tick_stop = now

    def next_stop_at(self, name: str) -> float | None:
        t = self.tracks.get(name)
        if t is None or t.last_stop is None:
            return None
        return t.last_stop + backoff(t.stops, self.limits)

    # ------------------------------------------------------------ status

    def describe(self, name: str, now: float) -> str:
        """One line for ``spur k8s status`` ("" when there is nothing to say)."""
        t = self.tracks.get(name)
        if t is None:
            return ""
        parts = []
        if t.reported is not None:
            parts.append("drift " + t.reported.describe())
        elif t.last is not None:
            parts.append(f"possible drift (seen once, awaiting a second reading): {t.last.describe()}")
        if t.stops:
            state = (
                f"verifying ({t.verifying} stopped reading(s) to go)" if t.verifying
                else "running again" if t.running else "stopped"
            )
            parts.append(f"stray: stopped {t.stops}x, {t.done} done, {t.returns} return(s), {state}")
            nxt = self.next_stop_at(name)
            if nxt is not None and nxt > now:
                parts.append(f"next stop not before {nxt - now:.0f}s")
        if t.confirmed and t.last is not None and t.last.stoppable and self.blocked:
            parts.append(f"stop waits: {self.blocked}")
        return "; ".join(parts)
