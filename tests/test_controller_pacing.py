"""Run-loop pacing (spur.controller.pacing): a busy controller's loop waits a little before it blocks,
an idle one never does, and no wait outlasts the loop's own timeout."""

from __future__ import annotations

import math
import time

import pytest
import trio

from spur.controller.pacing import BusyMeter, RunLoopPacer, linger_for


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
    assert linger_for(0.9, 1.0, linger=0.002, threshold=0.5) == 0.002
    assert linger_for(0.9, 0.0005, linger=0.002, threshold=0.5) == 0.0005  # a deadline is near
    assert linger_for(0.9, 0.0, linger=0.002, threshold=0.5) == 0.0  # tasks are runnable: no wait
    assert linger_for(0.4, 1.0, linger=0.002, threshold=0.5) == 0.0  # not busy enough
    assert linger_for(0.9, math.inf, linger=0.0, threshold=0.5) == 0.0  # turned off
    assert linger_for(0.0, math.inf, linger=0.002, threshold=0.0) == 0.002  # threshold 0: always


def _pacer(clock: FakeClock, waits: list[float]) -> RunLoopPacer:
    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds

    return RunLoopPacer(linger=0.002, busy_threshold=0.5, window=0.2, sleep=sleep, clock=clock)


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
    # Load: passes of 1 ms with 0.3 ms waits between them. Once the meter says busy (about a
    # window's time: 0.2 s), every block is preceded by a linger, capped by the loop's timeout; the
    # lingers do not count as idle time, so the pacing does not switch itself off.
    for i in range(400):
        if i == 300:
            assert pacer.meter.busy > 0.5 and pacer.lingered > 0
            at_300 = pacer.lingered
        clock.now += 0.001
        pacer.before_io_wait(0.0001 if i == 399 else 1.0)
        clock.now += 0.0003
        pacer.after_io_wait(1.0)
    assert pacer.lingered - at_300 == 100 and set(waits) == {0.002, 0.0001}
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
                        clock.now += 0.05  # each wake's work: the loop is busy
        finally:
            trio.lowlevel.remove_instrument(pacer)

    trio.run(main)
    assert sum(per_wake) == 200
    assert pacer.lingered > 0 and all(0 < w <= 0.005 for w in waits)
    # With the loop lingering 5 ms while items come every 0.5 ms, wakes carry several items.
    assert max(per_wake) >= 4
