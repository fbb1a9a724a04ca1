"""What the dispatcher does when an agent does not acknowledge a launch. Pure: no I/O, no clock.

A launch is acknowledged when the agent answers LaunchJob without an error. Otherwise:

- a refusal the job itself caused (INVALID_ARGUMENT, FAILED_PRECONDITION: a bad script path, a user
  the node does not know, a launch fenced by a newer controller term) is final: the job FAILS with
  the agent's message (the agent has recorded and reports the same failure);
- anything else (unreachable, timed out, an internal error, an authentication refusal) is retried
  up to ``max_attempts`` times with exponential backoff, and then the job is requeued (it never ran)
  with the reason ``launch failed requeued``, or failed when it may not be requeued (``--no-requeue``
  or an interactive srun job, whose client is waiting for it now). The state machine fails a job
  whose launch was requeued three times.

So a job is never left RUNNING on a node that refused or ignored its launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from spur.rpc.status import StatusCode

__all__ = ["Fail", "LaunchPolicy", "Requeue", "Retry", "next_step"]

_FINAL_CODES = frozenset({StatusCode.INVALID_ARGUMENT, StatusCode.FAILED_PRECONDITION})


@dataclass(frozen=True)
class Retry:
    """Send the launch again after ``delay`` seconds."""

    delay: float


@dataclass(frozen=True)
class Requeue:
    """Give the allocation back and put the job back in the queue with ``reason``."""

    reason: str


@dataclass(frozen=True)
class Fail:
    """End the job as FAILED with ``reason``."""

    reason: str


@dataclass(frozen=True)
class LaunchPolicy:
    max_attempts: int = 3
    first_delay: float = 0.5
    max_delay: float = 10.0

    def delay(self, attempt: int) -> float:
        """Backoff before attempt ``attempt + 1`` (``attempt`` >= 1 attempts made so far)."""
        return min(self.first_delay * 2 ** (attempt - 1), self.max_delay)


def next_step(
    policy: LaunchPolicy,
    attempt: int,
    code: StatusCode,
    message: str,
    *,
    node: str,
    requeueable: bool,
) -> Retry | Requeue | Fail:
    """The dispatcher's move after attempt number ``attempt`` (1-based) on ``node`` failed with ``code``."""
    if code in _FINAL_CODES:
        return Fail(f"launch failed on {node}: {message}")
    if attempt < policy.max_attempts:
        return Retry(policy.delay(attempt))
    what = f"launch not acknowledged by {node} after {attempt} attempts: {message}"
    return Requeue(what) if requeueable else Fail(what)
