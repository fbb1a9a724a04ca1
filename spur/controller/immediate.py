"""The leader's half of the immediate grant (spur.state.immediate): decide for each submission before
proposing it, and remember the submissions in flight until Raft has applied them.

Decisions and the bookkeeping run on the controller's one Trio thread between awaits, so each decision
sees every earlier one (applied, or still in flight here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spur.accounting.shares import weights_of
from spur.core.job import Job, JobSpec
from spur.state.immediate import NO_GRANT, Decision, Flying, InFlight, JobLimits, decide_grant

if TYPE_CHECKING:
    from spur.config.model import SpurConfig
    from spur.state.machine import ClusterState


class GrantHost(Protocol):
    """What the immediate grant reads from the controller."""

    @property
    def state(self) -> ClusterState: ...

    @property
    def cfg(self) -> SpurConfig: ...

    @property
    def plugin_manager(self) -> object: ...


class ImmediateGrants:
    """``decide`` then ``with grants.flying(decision):`` around the proposal of the submission."""

    def __init__(self, host: GrantHost) -> None:
        self._host = host
        self._in_flight = Flying()

    def decide(self, spec: JobSpec, user: str, now: float) -> Decision:
        """Whether the job ``user`` submits at ``now`` starts in its submit entry, and where."""
        host = self._host
        hook = getattr(getattr(host.plugin_manager, "hook", None), "spur_place_now", None)
        if hook is None:
            return NO_GRANT
        state = host.state
        accounting = state.domains.get("accounting")
        weights = weights_of(host.cfg.priority)
        gate = accounting.scheduling_gate() if accounting is not None else None  # type: ignore[attr-defined]

        def priorities(jobs: list[Job]) -> dict[int, int]:
            if accounting is None:
                return {}
            return accounting.priorities(jobs, weights, now)  # type: ignore[attr-defined]

        limits: JobLimits | None = gate
        return decide_grant(
            state,
            spec,
            user,
            now,
            place=lambda snapshot, job: hook(snapshot=snapshot, job=job, options={}),
            priorities=priorities,
            limits=limits,
            in_flight=self._in_flight,
        )

    def flying(self, decision: Decision) -> _Flying:
        """Count ``decision``'s submission as in flight for the ``with`` block (the proposal)."""
        return _Flying(self, decision.in_flight)

    def __len__(self) -> int:
        return len(self._in_flight)


class _Flying:
    __slots__ = ("_grants", "_entry", "_key")

    def __init__(self, grants: ImmediateGrants, entry: InFlight | None) -> None:
        self._grants = grants
        self._entry = entry
        self._key = -1

    def __enter__(self) -> None:
        if self._entry is not None:
            self._key = self._grants._in_flight.add(self._entry)

    def __exit__(self, *exc: object) -> None:
        if self._entry is not None:
            self._grants._in_flight.remove(self._key)
