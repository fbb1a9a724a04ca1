"""Timestamped spans of one job's way through Spur, for latency breakdowns (``bench.interactive``).

``span(job_id, name)`` records ``trace job=<id> <name> t=<unix seconds, 6 decimals>``: in a daemon at
DEBUG on the ``spur.trace`` logger (so in its log), in a command on its stderr. Spans are off (a
function call that returns at once) unless ``SPUR_TRACE=1`` is in the environment when
:func:`enable_from_environment` runs: the daemons call it after configuring logging, srun with
``stderr=True``. The wall clock is used because spans from several processes go on one time line.
Nothing is imported until spans are turned on (the commands' start-up time is measured).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time (a CLI start-up cost)
if TYPE_CHECKING:
    from collections.abc import Callable

_sink: Callable[[str], None] | None = None


def enable_from_environment(*, stderr: bool = False) -> bool:
    """Turn spans on when ``SPUR_TRACE=1`` (to the ``spur.trace`` logger, or with ``stderr`` straight
    to this process's stderr); returns whether they are on."""
    global _sink
    if os.environ.get("SPUR_TRACE") != "1":
        return False
    if stderr:

        def write(line: str) -> None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

        _sink = write
    else:
        import logging

        log = logging.getLogger("spur.trace")
        log.setLevel(logging.DEBUG)
        _sink = log.debug
    return True


def spans_on() -> bool:
    return _sink is not None


def span(job_id: int, name: str) -> None:
    """Record that ``job_id`` reached ``name`` now (a no-op unless spans are on)."""
    if _sink is not None:
        _sink(f"trace job={job_id} {name} t={time.time():.6f}")


def span_at(job_id: int, name: str, when: float) -> None:
    """Record that ``job_id`` reached ``name`` at wall time ``when`` (for a span whose job id was not
    known yet at that moment, such as a submission's arrival)."""
    if _sink is not None:
        _sink(f"trace job={job_id} {name} t={when:.6f}")
