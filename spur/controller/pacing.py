"""Run-loop pacing: under load, the controller's event loop waits a little before it sleeps, so that
the work arriving meanwhile is handled in one pass instead of one pass each.

A controller at moderate load wakes once per event: a call, an fsync done, an agent's answer. Each
wake costs a run-loop pass and a system call (and, it seems, caches gone cold while other processes
ran), and each small batch (a Raft entry, a launch call) carries its fixed cost for one or two jobs. So CPU
per job was nearly twice as high at 500 jobs/s as at 1,000/s, where events pile up by themselves.

:class:`RunLoopPacer` is a Trio instrument. Before the loop blocks for I/O (nothing is runnable), if
the loop has recently been busy for at least ``busy_threshold`` of its time, it first sleeps for
``linger`` seconds (at most the loop's own timeout), so that the events arriving meanwhile are
handled together. Trio then waits with the timeout it had computed, so a timer due meanwhile fires up
to ``linger`` late. An idle or lightly loaded controller never lingers: an ``srun`` on a quiet cluster
is as quick as before. A saturated one never blocks, so never lingers either. What each linger adds to
an answer is at most ``linger`` per pass it waits in.

:class:`BusyMeter` and :func:`linger_for` hold the decision, free of I/O and clocks: how busy the
loop has been, as an exponentially weighted fraction of time with a time constant of ``window``
seconds, and whether that calls for a wait. The lingers themselves are left out of the measure: they
are not time the loop had nothing to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from math import exp

import trio

DEFAULT_WINDOW = 0.2  # seconds


class BusyMeter:
    """The fraction of time the loop ran tasks rather than waited for I/O, weighted towards the last
    ``window`` seconds. Feed it each stretch as it ends: :meth:`ran` and :meth:`waited`."""

    def __init__(self, window: float = DEFAULT_WINDOW) -> None:
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = window
        self._rate = -1.0 / window
        self.busy = 0.0  # in [0, 1]

    # Both run on every pass of the event loop, so each mixes in place, without a helper call.
    def ran(self, seconds: float) -> None:
        """Mix in ``seconds`` of running tasks (busy = 1)."""
        if seconds > 0:
            self.busy = 1.0 - (1.0 - self.busy) * exp(seconds * self._rate)

    def waited(self, seconds: float) -> None:
        """Mix in ``seconds`` of waiting for I/O (busy = 0)."""
        if seconds > 0:
            self.busy *= exp(seconds * self._rate)


def linger_for(busy: float, timeout: float, *, linger: float, threshold: float) -> float:
    """How long to wait before blocking for at most ``timeout`` seconds: ``linger`` (capped by the
    timeout) when the loop has been busy at least ``threshold`` of its time, else 0."""
    if linger <= 0 or timeout <= 0 or busy < threshold:
        return 0.0
    return min(linger, timeout)


class RunLoopPacer(trio.abc.Instrument):
    """See the module docstring. ``linger`` (seconds) and ``busy_threshold`` come from
    ``[controller] pace_linger_ms`` and ``pace_busy_fraction``, whose defaults the config holds.
    ``sleep`` and ``clock`` are for tests (``time.sleep`` and ``time.perf_counter`` otherwise)."""

    def __init__(
        self,
        *,
        linger: float,
        busy_threshold: float,
        window: float = DEFAULT_WINDOW,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if linger < 0:
            raise ValueError("linger must not be negative")
        if not 0 <= busy_threshold <= 1:
            raise ValueError("busy_threshold must be between 0 and 1")
        self.linger = linger
        self.busy_threshold = busy_threshold
        self.meter = BusyMeter(window)
        self.lingered = 0  # waits made (for tests and benchmarks)
        self._sleep = sleep
        self._clock = clock
        self._mark = clock()
        self._lingering = 0.0  # the linger inside the current wait, which is no measure of load

    def before_io_wait(self, timeout: float) -> None:
        now = self._clock()
        self.meter.ran(now - self._mark)
        self._mark = now
        if self.meter.busy < self.busy_threshold:  # off load, the usual case: linger_for would say 0
            self._lingering = 0.0
            return
        wait = linger_for(self.meter.busy, timeout, linger=self.linger, threshold=self.busy_threshold)
        self._lingering = wait
        if wait:
            self.lingered += 1
            self._sleep(wait)

    def after_io_wait(self, timeout: float) -> None:
        # Only the wait for work counts: with the linger counted as idle time, pacing would make the
        # loop look idle, stop, and start again, in turns.
        now = self._clock()
        self.meter.waited(now - self._mark - self._lingering)
        self._mark = now
