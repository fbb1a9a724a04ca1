"""Bounded admission of job submissions (backpressure instead of congestion collapse).

A controller offered more submissions than it can schedule must not let them pile up in front of the
work that drains the queue (heartbeats, job reports, launches): every admitted submission costs a
Raft entry now and a scheduling attempt later. :func:`refusal` is the pure decision; :class:`SubmitGate`
counts the submissions between admission and commit. A refused submission changes nothing and is told
``RESOURCE_EXHAUSTED`` with Slurm's text for EAGAIN, "Resource temporarily unavailable"; Spur's
clients (sbatch, srun, salloc) then back off and retry, as Slurm's do ("Slurm temporarily unable to
accept job, sleeping and retrying"). Submissions already admitted are never dropped.
"""

from __future__ import annotations

from spur.rpc.status import RpcError, StatusCode

__all__ = ["BUSY", "SubmitGate", "array_size", "refusal"]

BUSY = "Resource temporarily unavailable"


def array_size(array: str) -> int:
    """Jobs a submission creates: the tasks of its ``--array`` spec, else 1 (an invalid spec counts 1;
    the state machine refuses it with its own message)."""
    if not array:
        return 1
    from spur.core.job_options import parse_array_spec

    try:
        return max(1, len(parse_array_spec(array)[0]))
    except ValueError:
        return 1


def refusal(
    in_flight: int, live_jobs: int, new_jobs: int, *, max_in_flight: int, max_job_count: int
) -> str | None:
    """Why a submission of ``new_jobs`` jobs (an array counts its tasks) must wait, or None to admit.

    ``in_flight``: submissions admitted and not yet committed; ``live_jobs``: jobs not finished. A
    submission that alone exceeds ``max_job_count`` is still admitted into an empty controller, so an
    oversized array is not refused forever.
    """
    if in_flight >= max_in_flight:
        return f"{BUSY} (controller busy: {in_flight} submissions in progress)"
    if live_jobs > 0 and live_jobs + new_jobs > max_job_count:
        return f"{BUSY} (MaxJobCount {max_job_count} reached: {live_jobs} jobs not finished)"
    return None


class SubmitGate:
    """Counts admitted submissions until their commit; ``admit`` raises RESOURCE_EXHAUSTED when full."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.refused = 0  # submissions refused so far (benchmarks and metrics read it)

    def admit(self, live_jobs: int, new_jobs: int, *, max_in_flight: int, max_job_count: int) -> _Admitted:
        """``with gate.admit(...):`` around the proposal of one admitted submission; raises
        RESOURCE_EXHAUSTED (and counts a refusal) at once when it must wait."""
        why = refusal(
            self.in_flight, live_jobs, new_jobs, max_in_flight=max_in_flight, max_job_count=max_job_count
        )
        if why is not None:
            self.refused += 1
            raise RpcError(StatusCode.RESOURCE_EXHAUSTED, why)
        self.in_flight += 1
        return _Admitted(self)


class _Admitted:
    """One admitted submission; leaving the ``with`` block (however) gives its place back. A plain
    class rather than ``@contextmanager``: this runs on every submission."""

    __slots__ = ("_gate",)

    def __init__(self, gate: SubmitGate) -> None:
        self._gate = gate

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._gate.in_flight -= 1
