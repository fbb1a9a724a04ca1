"""Run-loop pacing: under load, the controller's event loop waits a little before it sleeps, so that
the work arriving meanwhile is handled in one pass instead of one pass each.

A controller at moderate load wakes once per event: a call, an fsync done, an agent's answer. Each
wake costs a run-loop pass, a system call and a thread that slept (on the 2-core test machine a small
unit of Python work costs 2.5-3.5 times as much right after its thread slept 5-20 ms as back to back:
``bench.wake_cost``), and each small batch (a Raft entry, a launch call) carries its fixed cost for
one or two jobs. So CPU per job was nearly twice as high at 500 jobs/s as at 1,000/s, where events
pile up by themselves.

:class:`RunLoopPacer` is a Trio instrument. Before the loop blocks for I/O (nothing is runnable), if
the loop has recently been busy for at least ``busy_threshold`` of its time, it first sleeps for
``linger`` seconds (at most the loop's own timeout), so that the events arriving meanwhile are
handled together. Trio then waits with the timeout it had computed, so a timer due meanwhile fires up
to ``linger`` late. An idle or lightly loaded controller never lingers: an ``srun`` on a quiet cluster
is as quick as before. A saturated one never blocks, so never lingers either. What each linger adds to
an answer is at most ``linger`` per pass it waits in.

Two meters watch the loop, both exponentially weighted fractions of time with a time constant of
``window`` seconds (:class:`BusyMeter`):

- ``meter`` (busy) leaves the lingers out: they are not time the loop had nothing to do. It says
  whether work keeps coming. Once the loop lingers, it stays high while work arrives within each
  linger, and falls once lingers start finding nothing (the loop then blocks, and that wait counts).
- ``load`` counts the lingers as idle: the share of the loop's wall time spent working. It sets how
  long the linger is (:func:`linger_at`):

  - nothing up to ``RAMP_FROM``. A loop that works this little is following one chain of events (a
    job array turning over on one node: each answer comes back within a few milliseconds and causes
    the next step), and a linger there catches the next link of the chain and nothing else, so it
    only adds its time to every step;
  - growing in proportion to the whole linger at ``RAMP_TO``: the fleet's 100 to 500 jobs/s, whose
    loop works 35-70% of its wall time, has many independent events to gather per linger;
  - shrinking in proportion above ``TAPER_FROM``, to ``SATURATED_LINGER`` (2 ms) at ``TAPER_TO`` and
    beyond, or to the whole linger where that is shorter: what the loop lingered near saturation
    before, unharmed. Near saturation a long linger stretches every pass, answers wait, calls in
    flight pile up to ``max_submit_queue``, and the loop stops keeping up: an untapered 5 ms linger
    refused thousands of submissions at 1,500 jobs/s offered, where 2 ms refused none in the run
    beside it (``bench/README.md``). The floor is a duration, not a share of the linger, so a longer
    linger at moderate load leaves the loop near saturation as it was.

  A linger lowers the load (it counts as idle, and the batches it makes cost less), so a loop near a
  bound settles instead of switching the linger on and off.

:func:`linger_for` holds the decision, free of I/O and clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from math import exp

import trio

DEFAULT_WINDOW = 0.2  # seconds
# Shares of the loop's wall time spent working (lingers counted as idle) that shape the linger; see the
# module docstring and linger_at.
RAMP_FROM = 0.3
RAMP_TO = 0.45
TAPER_FROM = 0.6
TAPER_TO = 0.9
SATURATED_LINGER = 0.002  # seconds: the most a loop at or past TAPER_TO lingers


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


def linger_share(load: float) -> float:
    """The share of the configured linger a loop with ``load`` (its wall time spent working, lingers
    counted as idle) waits up to ``TAPER_FROM``: 0 up to ``RAMP_FROM``, rising in proportion to 1 at
    ``RAMP_TO``, and 1 from there (:func:`linger_at` tapers it above ``TAPER_FROM``)."""
    if load <= RAMP_FROM:
        return 0.0
    if load < RAMP_TO:
        return (load - RAMP_FROM) / (RAMP_TO - RAMP_FROM)
    return 1.0


def linger_at(load: float, linger: float) -> float:
    """Seconds a loop with ``load`` lingers when configured for ``linger``: ``linger`` times
    :func:`linger_share` up to ``TAPER_FROM``; above it, falling in proportion to the shorter of
    ``linger`` and ``SATURATED_LINGER`` at ``TAPER_TO``, and that beyond."""
    if load <= TAPER_FROM:
        return linger * linger_share(load)
    floor = min(linger, SATURATED_LINGER)
    near = min(1.0, (load - TAPER_FROM) / (TAPER_TO - TAPER_FROM))
    return linger - (linger - floor) * near


def linger_for(busy: float, timeout: float, *, linger: float, threshold: float, load: float) -> float:
    """How long to wait before blocking for at most ``timeout`` seconds: 0 unless the loop has been
    busy at least ``threshold`` of its time (lingers left out); then :func:`linger_at` its ``load``;
    never more than the timeout."""
    if linger <= 0 or timeout <= 0 or busy < threshold:
        return 0.0
    return min(linger_at(load, linger), timeout)


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
        self.meter = BusyMeter(window)  # lingers left out: does work keep coming?
        self.load = BusyMeter(window)  # lingers counted as idle: the share of time working sets the linger
        self.lingered = 0  # waits made (for tests and benchmarks)
        self._sleep = sleep
        self._clock = clock
        self._mark = clock()
        self._lingering = 0.0  # the linger inside the current wait, which is no measure of load

    def before_io_wait(self, timeout: float) -> None:
        now = self._clock()
        self.meter.ran(now - self._mark)
        self.load.ran(now - self._mark)
        self._mark = now
        if self.meter.busy < self.busy_threshold:  # off load, the usual case: linger_for would say 0
            self._lingering = 0.0
            return
        wait = linger_for(
            self.meter.busy, timeout, linger=self.linger, threshold=self.busy_threshold, load=self.load.busy
        )
        self._lingering = wait
        if wait:
            self.lingered += 1
            self._sleep(wait)

    def after_io_wait(self, timeout: float) -> None:
        # Only the wait for work counts: with the linger counted as idle time, pacing would make the
        # loop look idle, stop, and start again, in turns.
        now = self._clock()
        self.meter.waited(now - self._mark - self._lingering)
        self.load.waited(now - self._mark)
        self._mark = now
