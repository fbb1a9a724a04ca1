"""Client side of the controller's backpressure: back off and retry a refused submission.

A controller that cannot take more submissions answers RESOURCE_EXHAUSTED ("Resource temporarily
unavailable"; spur/controller/intake.py). Slurm's sbatch then prints "Slurm temporarily unable to accept
job, sleeping and retrying" and sleeps 1, 2, 3 ... seconds, 15 tries at most; Spur's does the same, with
the delays from :func:`backoff_delays` (pure) so tests can shorten them through ``SPUR_BUSY_RETRY_SCALE``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

__all__ = ["BUSY_RETRY_MESSAGE", "Busy", "backoff_delays", "retry_while_busy", "submit_retrying"]

TYPE_CHECKING = False  # typing is not imported at run time (sbatch start-up)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

BUSY_RETRY_MESSAGE = "Slurm temporarily unable to accept job, sleeping and retrying"
MAX_RETRIES = 15  # Slurm's sbatch/srun


class Busy(Exception):
    """Raised by a submission body when the controller answered RESOURCE_EXHAUSTED."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def backoff_delays(retries: int = MAX_RETRIES, scale: float = 1.0) -> Iterator[float]:
    """Seconds to sleep before each retry: 1, 2, 3, ... (Slurm's), times ``scale``."""
    for n in range(1, retries + 1):
        yield n * scale


def retry_while_busy(
    attempt: Callable[[], T], prog: str, *, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Call ``attempt()`` until it does not raise :class:`Busy`, sleeping between tries and saying so on
    stderr; after the last retry the final :class:`Busy` propagates (its message is Slurm's EAGAIN)."""
    for delay in backoff_delays(scale=_scale()):
        try:
            return attempt()
        except Busy:
            print(f"{prog}: error: {BUSY_RETRY_MESSAGE}", file=sys.stderr)
            sys.stderr.flush()
            sleep(delay)
    return attempt()


def _scale() -> float:
    try:
        return max(0.0, float(os.environ.get("SPUR_BUSY_RETRY_SCALE", "1")))
    except ValueError:
        return 1.0


async def submit_retrying(
    call: Callable[[], Awaitable[T]], prog: str, *, sleep: Callable[[float], Awaitable[None]] | None = None
) -> T:
    """The async form for commands that run under Trio (srun, salloc): ``await call()`` until it is
    not refused with RESOURCE_EXHAUSTED, sleeping (``trio.sleep`` by default) and saying so between
    tries; after the last retry the refusal (an RpcError) propagates."""
    from spur.rpc.status import RpcError, StatusCode

    if sleep is None:
        import trio

        sleep = trio.sleep
    for delay in backoff_delays(scale=_scale()):
        try:
            return await call()
        except RpcError as exc:
            if exc.code is not StatusCode.RESOURCE_EXHAUSTED:
                raise
            print(f"{prog}: error: {BUSY_RETRY_MESSAGE}", file=sys.stderr)
            sys.stderr.flush()
            await sleep(delay)
    return await call()
