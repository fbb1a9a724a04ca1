"""Run-loop pacing (spur.controller.pacing): a busy controller's loop waits a little before it blocks,
an idle one never does, and no wait outlasts the loop's own timeout."""

from __future__ import annotations

import math
import time

import pytest
import trio

from spur.controller.pacing import (
    RAMP_FROM,
    RAMP_TO,
    SATURATED_LINGER,
    TAPER_FROM,
    TAPER_TO,
    BusyMeter,
    RunLoopPacer,
    linger_at,
    linger_for,
    linger_share,
)


class FakeClock:
    """perf_counter for the pacer: advanced by hand (work done, time waited)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_busy_meter_weighs_recent_time() -> None:
    meter = BusyMeter(window=0.2)
    meter.ran(0.2)
    assert meter.busy == pytest.approx(1 - math.exp(-1))
    meter.ran(10)
    assert meter.busy == pytest.approx(1.0)
    meter.waited(0.2)
    assert meter.busy == pytest.approx(math.exp(-1))
    meter.ran(0)  # nothing elapsed: no change
    assert meter.busy == pytest.approx(math.exp(-1))
    with pytest.raises(ValueError, match="window"):
        BusyMeter(window=0)


def test_linger_only_under_load_and_never_past_the_timeout() -> None:
    assert linger_for(0.9, 1.0, linger=0.002, threshold=0.5, load=0.5) == 0.002
    assert linger_for(0.9, 0.0005, linger=0.002, threshold=0.5, load=0.5) == 0.0005  # a deadline is near
    assert linger_for(0.9, 0.0, linger=0.002, threshold=0.5, load=0.5) == 0.0  # tasks are runnable: no wait
    assert linger_for(0.4, 1.0, linger=0.002, threshold=0.5, load=0.5) == 0.0  # not busy enough
    assert linger_for(0.9, math.inf, linger=0.0, threshold=0.5, load=0.5) == 0.0  # turned off
    assert linger_for(0.0, math.inf, linger=0.002, threshold=0.0, load=0.5) == 0.002  # threshold 0: always


def _pacer(clock: FakeClock, waits: list[float], linger: float = 0.002) -> RunLoopPacer:
    """A pacer on ``clock`` whose lingers are recorded in ``waits`` and advance the clock."""

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds

    return RunLoopPacer(linger=linger, busy_threshold=0.5, window=0.2, sleep=sleep, clock=clock)


def test_the_linger_follows_the_loops_load() -> None:
    """The load counts lingers as idle. A loop that works little is following one chain of events and
    does not linger; the linger grows to whole at RAMP_TO, stays whole to TAPER_FROM, then shrinks
    in proportion to SATURATED_LINGER (a duration, whatever the linger configured) at TAPER_TO, and
    stays there above it; a linger shorter than that floor stays whole."""
    assert linger_share(0.0) == linger_share(RAMP_FROM) == 0.0
    assert linger_share((RAMP_FROM + RAMP_TO) / 2) == pytest.approx(0.5)
    assert linger_share(RAMP_TO) == linger_share(TAPER_FROM) == 1.0
    whole = 0.01
    assert linger_at(RAMP_FROM, whole) == 0.0
    assert linger_at((RAMP_FROM + RAMP_TO) / 2, whole) == pytest.approx(whole / 2)
    assert linger_at(RAMP_TO, whole) == linger_at(TAPER_FROM, whole) == pytest.approx(whole)
    assert linger_at((TAPER_FROM + TAPER_TO) / 2, whole) == pytest.approx((whole + SATURATED_LINGER) / 2)
    assert linger_at(TAPER_TO, whole) == pytest.approx(SATURATED_LINGER)
    assert linger_at(1.0, whole) == pytest.approx(SATURATED_LINGER)
    assert linger_at(1.0, 0.001) == linger_at(TAPER_FROM, 0.001) == pytest.approx(0.001)  # under the floor
    assert linger_for(0.95, 1.0, linger=whole, threshold=0.5, load=0.5) == whole
    assert linger_for(0.95, 1.0, linger=whole, threshold=0.5, load=0.2) == 0.0
    assert linger_for(0.95, 1.0, linger=whole, threshold=0.5, load=1.0) == pytest.approx(SATURATED_LINGER)
    # Still never past the timeout, and nothing off load whatever the load says.
    assert linger_for(0.95, 0.001, linger=whole, threshold=0.5, load=0.5) == 0.001
    assert linger_for(0.3, 1.0, linger=whole, threshold=0.5, load=0.5) == 0.0


def test_the_loops_own_work_sets_how_long_it_lingers() -> None:
    """After a burst of work, each loop lingers before it blocks, for a time set by the share of its
    time it works. A loop following one chain of events (1 ms of work, then the answer 4 ms later)
    soon stops lingering: its load falls below RAMP_FROM and the lingers find nothing to gather. A loop
    with events always waiting lingers the whole 5 ms at 4 ms of work per pass (its load about 45%
    with the lingers counted as idle), and SATURATED_LINGER at 20 ms (its load near 1)."""

    def lingers(work: float, answer_after: float) -> list[float]:
        """The linger before each of the last 50 blocks (0: none)."""
        clock, waited = FakeClock(), list[float]()
        pacer = _pacer(clock, waited, linger=0.005)
        clock.now += 0.5  # the burst
        last: list[float] = []
        for _ in range(400):
            clock.now += work
            before = len(waited)
            pacer.before_io_wait(1.0)
            linger = waited[-1] if len(waited) > before else 0.0
            clock.now += max(0.0, answer_after - linger)  # the rest of the wait for I/O
            pacer.after_io_wait(1.0)
            last = [*last[-49:], linger]
        return last

    assert lingers(0.001, 0.004) == [0.0] * 50
    assert lingers(0.004, 0.0) == pytest.approx([0.005] * 50, rel=0.05)
    assert lingers(0.02, 0.0) == pytest.approx([SATURATED_LINGER] * 50)


def test_a_busy_loop_lingers_before_it_blocks_and_an_idle_one_does_not() -> None:
    clock, waits = FakeClock(), list[float]()
    pacer = _pacer(clock, waits)
    # Idle: passes of 50 us between waits of 50 ms (a few calls a second).
    for _ in range(50):
        clock.now += 0.00005
        pacer.before_io_wait(math.inf)
        clock.now += 0.05
        pacer.after_io_wait(math.inf)
    assert waits == [] and pacer.lingered == 0
    # Load: passes of 3 ms with 0.3 ms waits between them. Once the meter says busy (about a
    # window's time: 0.2 s), every block is preceded by a linger, capped by the loop's timeout; the
    # lingers do not count as idle time, so the pacing does not switch itself off. The loop works
    # about 57% of its wall time with the lingers counted as idle, so each is the whole 2 ms.
    for i in range(400):
        if i == 300:
            assert pacer.meter.busy > 0.5 and pacer.lingered > 0
            at_300, waits_at_300 = pacer.lingered, len(waits)
        clock.now += 0.003
        pacer.before_io_wait(0.0001 if i == 399 else 1.0)
        clock.now += 0.0003
        pacer.after_io_wait(1.0)
    assert pacer.lingered - at_300 == 100
    assert waits[waits_at_300:] == pytest.approx([0.002] * 99 + [0.0001])
    # Runnable tasks (timeout 0): never a wait, however busy.
    before = pacer.lingered
    clock.now += 0.001
    pacer.before_io_wait(0.0)
    assert pacer.lingered == before
    # Load gone: within a few windows the loop blocks at once again.
    for _ in range(40):
        clock.now += 0.00005
        pacer.before_io_wait(math.inf)
        clock.now += 0.05
        pacer.after_io_wait(math.inf)
    before = pacer.lingered
    clock.now += 0.00005
    pacer.before_io_wait(math.inf)
    assert pacer.lingered == before


def test_the_pacer_in_a_real_trio_loop_batches_what_arrives_while_it_lingers() -> None:
    """A loop kept busy (simulated work on the pacer's clock) lingers, and the events that come in
    meanwhile are handled in the pass after the wait: a memory channel fed from a thread delivers
    several items per wake."""
    clock, waits = FakeClock(), list[float]()
    real_waits: list[float] = []

    def sleep(seconds: float) -> None:
        import time

        waits.append(seconds)
        real_waits.append(seconds)
        time.sleep(seconds)
        clock.now += seconds  # the pacer's clock sees the linger too: the load stays near half

    pacer = RunLoopPacer(linger=0.005, busy_threshold=0.5, window=0.2, sleep=sleep, clock=clock)
    per_wake: list[int] = []

    async def main() -> None:
        send, receive = trio.open_memory_channel[int](1000)
        token = trio.lowlevel.current_trio_token()

        def feed() -> None:
            for i in range(200):
                token.run_sync_soon(send.send_nowait, i)
                time.sleep(0.0005)
            token.run_sync_soon(send.close)

        trio.lowlevel.add_instrument(pacer)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, feed)
                async with receive:
                    while True:
                        try:
                            await receive.receive()
                        except trio.EndOfChannel:
                            break
                        got = 1
                        while True:
                            try:
                                receive.receive_nowait()
                                got += 1
                            except trio.WouldBlock:
                                break
                            except trio.EndOfChannel:
                                break
                        per_wake.append(got)
                        clock.now += 0.005  # each wake's work: the loop is busy
        finally:
            trio.lowlevel.remove_instrument(pacer)

    trio.run(main)
    assert sum(per_wake) == 200
    assert pacer.lingered > 0 and all(0 < w <= 0.005 for w in waits)
    # With the loop lingering 5 ms while items come every 0.5 ms, wakes carry several items.
    assert max(per_wake) >= 4
