"""Injected time: wall-clock timestamps and the Trio clock for timers.

Loops sleep with ``trio.sleep`` (so Trio's MockClock drives them in tests) and stamp records with
``Clock.wall()``. ``MockWallClock`` follows Trio's clock so that a test's jump in time moves both.
"""

from __future__ import annotations

import time

import trio


class Clock:
    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return trio.current_time()


class MockWallClock(Clock):
    """Wall time = ``epoch`` + Trio's current time; use with trio.testing.MockClock."""

    def __init__(self, epoch: float = 1_800_000_000.0) -> None:
        self.epoch = epoch

    def wall(self) -> float:
        return self.epoch + trio.current_time()
