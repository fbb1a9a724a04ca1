"""The starter's rules: when the leader (re)starts k0s on a cluster node. Pure: no I/O, time passed in.

While the cluster is provisioning or ready, every node with a role whose k0s is not running is
started (:func:`start_due`); which node may go first (the bootstrap control plane, then the others,
then workers) is :func:`spur.k8s.cluster.reconcile.decide`'s business. Per node the leader keeps a
:class:`StartState` (leader-local: a new leader starts with none):

1. Never a second start while one is in flight for the node.
2. A start that fails (the agent refuses it, the call fails, or no answer within
   :data:`START_TIMEOUT` = 900 s) is a failure: its reason is kept and shown, and the next start waits.
3. A start the agent accepted that does not bring the node to running (the next reading finds the
   unit ``failed``, ``inactive`` or ``absent``) is a failure too.
4. A unit systemd gave up on (``failed``) that no start of this leader left behind waits as well
   (the unit's own failure: shown, not counted as a start failure).
5. The wait after the n-th failure in a row is 60 s doubled n-1 times, at most 600 s
   (60, 120, 240, 480, 600, 600 ...: :func:`retry_delay`).
6. The wait and the failure count are dropped once the node runs, and when its Spur node comes back
   from down.
7. States systemd is already working on (``activating``, ``starting``) and an agent that does not
   answer (``unreachable``) are never started.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "FIRST_RETRY",
    "IDLE",
    "MAX_RETRY",
    "START_TIMEOUT",
    "StartState",
    "back_from_down",
    "needs_start",
    "observed",
    "retry_delay",
    "start_answered",
    "start_due",
    "start_failed",
    "start_sent",
]

START_TIMEOUT = 900.0  # long enough for a k0s download
FIRST_RETRY = 60.0
MAX_RETRY = 600.0

RUNNING = "active"
SYSTEMD_STARTING = ("activating", "starting")
GAVE_UP = "failed"
UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class StartState:
    """One node's start bookkeeping on this leader.

    ``in_flight_since``: when the unanswered start was sent (None: none in flight). ``failures``:
    failures in a row since the node last ran. ``reason``: why the last one failed. ``retry_at``: no
    start before this time (None: no wait). ``open_attempt``: a start was accepted and the node has
    neither run nor failed since (its outcome is still to be read).
    """

    in_flight_since: float | None = None
    failures: int = 0
    reason: str = ""
    retry_at: float | None = None
    open_attempt: bool = False


IDLE = StartState()


def retry_delay(failures: int) -> float:
    """The wait after ``failures`` failures in a row: 0 for none, then 60 s doubling, at most 600 s."""
    if failures < 1:
        return 0.0
    return min(MAX_RETRY, FIRST_RETRY * 2 ** min(failures - 1, 16))


def needs_start(component_state: str) -> bool:
    """True when k0s is not running and nothing is already bringing it up (rule 7)."""
    return component_state not in (RUNNING, *SYSTEMD_STARTING, UNREACHABLE)


def start_due(st: StartState, component_state: str, now: float) -> bool:
    """Whether a start may be sent now (rules 1, 4, 5, 7). A ``failed`` unit with no wait recorded yet
    has not been read by this leader: :func:`observed` gives it its first wait before any start."""
    if st.in_flight_since is not None or not needs_start(component_state):
        return False
    if st.retry_at is not None:
        return now >= st.retry_at
    return component_state != GAVE_UP


def start_sent(st: StartState, now: float) -> StartState:
    """A start went out at ``now``."""
    return replace(st, in_flight_since=now, open_attempt=False)


def start_failed(st: StartState, reason: str, now: float) -> StartState:
    """The start failed (rule 2 or 3): one more failure, and the next start waits (rule 5)."""
    failures = st.failures + 1
    return StartState(failures=failures, reason=reason, retry_at=now + retry_delay(failures))


def start_answered(st: StartState, component_state: str, detail: str, now: float) -> tuple[StartState, bool]:
    """The agent accepted the start and reported ``component_state``. Returns the new state and
    whether this counts as a failed start (the unit failed at once)."""
    if component_state == RUNNING:
        return IDLE, False
    if component_state == GAVE_UP:
        return start_failed(st, detail or "the k0s unit failed right after the start", now), True
    return replace(st, in_flight_since=None, open_attempt=True), False


def observed(st: StartState, component_state: str, detail: str, now: float) -> tuple[StartState, bool]:
    """A reading of the node's k0s. Returns the new state and whether a start failure is to be
    counted (rule 3). A running node forgets its failures (rule 6); a ``failed`` unit no start of
    ours left behind gets a wait (rule 4). Readings while a start is in flight change nothing."""
    if st.in_flight_since is not None:
        return st, False
    if component_state == RUNNING:
        return IDLE, False
    if st.open_attempt and needs_start(component_state):
        return start_failed(st, detail or f"k0s is {component_state} after the start", now), True
    if component_state == GAVE_UP and st.retry_at is None:
        failures = st.failures + 1
        reason = detail or "the k0s unit failed"
        return StartState(failures=failures, reason=reason, retry_at=now + retry_delay(failures)), False
    return st, False


def back_from_down(st: StartState) -> StartState:
    """The node's Spur node came back from down: no wait, no failures (rule 6); an in-flight start
    stays in flight."""
    return replace(IDLE, in_flight_since=st.in_flight_since)
