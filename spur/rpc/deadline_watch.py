"""Deadlines of calls that have no task of their own, kept by one task per connection.

A call a companion ``M_now`` will answer from the connection's reader (see :mod:`spur.rpc.server`)
has no task, so no cancel scope to carry its ``grpc-timeout``, while it waits for the rest of its
request. :class:`DeadlineWatch` holds such deadlines in a heap and hands each item whose
deadline has passed to ``expire``; one task (:meth:`DeadlineWatch.run`) sleeps until the earliest.

Contract:

- ``expire(item)`` is called once for each item watched, when its deadline has passed, unless the
  heap was emptied first: every watched item is released (:meth:`release`, once per item) before
  its deadline, and then nothing is left to expire. ``expire`` must itself tell an item already
  answered (whose release is still to come, or already came) from a live one: the watch keeps no
  per-item state, so that watching costs one heap push and releasing one decrement.
- The task wakes at most once every ``tick`` seconds (an expiry may be up to ``tick`` late), so
  that many short-lived calls with deadlines do not wake it once each.
- The heap is bounded by what is live: released items stay in it until their deadline or until
  nothing is live, but when it holds more than ``2 * live + SLACK`` entries the ones ``alive`` says
  are answered are dropped (amortized: a rebuild follows at least ``live + SLACK`` pushes). So a
  peer that keeps one call waiting forever cannot make the heap keep every call it sends after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count
from typing import Generic, TypeVar

import trio

__all__ = ["DEADLINE_TICK", "SLACK", "DeadlineWatch"]

T = TypeVar("T")

DEADLINE_TICK = 0.05  # seconds
SLACK = 256  # entries the heap may hold beyond twice the live ones before it drops answered ones


class DeadlineWatch(Generic[T]):
    """See the module docstring. Single-threaded: the connection's Trio thread owns it."""

    def __init__(
        self, expire: Callable[[T], None], alive: Callable[[T], bool], *, tick: float = DEADLINE_TICK
    ) -> None:
        self._expire = expire
        self._alive = alive
        self.tick = tick
        self._heap: list[tuple[float, int, T]] = []
        self._order = count()  # ties in deadline never compare the items
        self.live = 0  # items watched and not yet released
        self._scope: trio.CancelScope | None = None
        self._wake = trio.Event()
        self._last_check = -float("inf")

    def watch(self, deadline: float, item: T) -> None:
        """Expire ``item`` at ``deadline`` (Trio's clock) unless it is released first."""
        heap = self._heap
        heapq.heappush(heap, (deadline, next(self._order), item))
        self.live += 1
        if len(heap) > 2 * self.live + SLACK:
            heap[:] = [entry for entry in heap if self._alive(entry[2])]
            heapq.heapify(heap)
        scope = self._scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = max(deadline, self._last_check + self.tick)
        self._wake.set()

    def release(self) -> None:
        """One watched item was answered; when none is left, every deadline is forgotten."""
        self.live -= 1
        if self.live <= 0:
            self.live = 0
            self._heap.clear()

    @property
    def size(self) -> int:
        """Entries in the heap, live or answered."""
        return len(self._heap)

    def due(self, now: float) -> list[T]:
        """Take the items whose deadline is at or before ``now``, earliest first."""
        heap, taken = self._heap, []
        while heap and heap[0][0] <= now:
            taken.append(heapq.heappop(heap)[2])
        return taken

    async def run(self) -> None:
        """Expire items as their deadlines pass, until cancelled."""
        while True:
            if not self._heap:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            with trio.CancelScope(deadline=max(self._heap[0][0], self._last_check + self.tick)) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            now = self._last_check = trio.current_time()
            for item in self.due(now):
                self._expire(item)
