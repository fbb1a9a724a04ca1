"""A live page's refresh loop: when to render a page's live part again, and what to send.

A refresh of a big page is not free: the Jobs page of a 10,000-job queue builds, folds and sorts a
record per job on the controller's event loop, tens of milliseconds that submissions and Raft wait
behind. Each open page therefore refreshes after a change of the controller's state, but no sooner
than :func:`refresh_gap` after its previous refresh began: at least :data:`MIN_GAP_SECS`, and long
enough that its refreshes take at most :data:`DUTY` of the time. A cheap page (the Overview, Nodes,
a job) updates every second; the Jobs page of a big queue every few seconds. A refresh's cost is its
wall time, so on a loaded controller (whose other tasks run while a refresh yields) pages back off
further, and catch up when it is idle again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

MIN_GAP_SECS = 1.0
# The share of the time one open page may spend refreshing (its render's wall time / the gap).
DUTY = 0.02
# Without any change a page is still refreshed this often (its charts' clock, elapsed times).
IDLE_REFRESH_SECS = 15.0


def refresh_gap(cost_secs: float) -> float:
    """Seconds from the start of a refresh that took ``cost_secs`` to the start of the next one."""
    return max(MIN_GAP_SECS, cost_secs / DUTY)


class Refused(Exception):
    """A refresh the controller refused: ``event`` is sent as it is; ``final`` ends the stream."""

    def __init__(self, event: str, *, final: bool) -> None:
        super().__init__(event)
        self.event = event
        self.final = final


class EventSink(Protocol):
    async def send(self, value: str, /) -> None: ...


async def refresh_loop(
    render: Callable[[], Awaitable[str]],
    watch_changes: Callable[[], Callable[[], Awaitable[None]]],
    send: EventSink,
    event: Callable[[str], str],
) -> None:
    """Send ``event(html)`` for each rendered live part that differs from the last one sent, and an
    SSE comment when it does not (a closed connection is noticed there). Between two refreshes: a
    state change or :data:`IDLE_REFRESH_SECS`, and at least :func:`refresh_gap` of the previous
    refresh's cost. ``watch_changes()`` is called as a refresh begins and returns what waits for the
    first state change after that moment, so a change made while the page renders or is sent is not
    missed. ``render`` raising :class:`Refused` sends its event and keeps the last page (or returns,
    when final)."""
    last: str | None = None
    while True:
        started = trio.current_time()
        wait_change = watch_changes()
        html: str | None
        try:
            html = await render()
        except Refused as exc:
            await send.send(exc.event)
            if exc.final:
                return
            html = last
        cost = trio.current_time() - started
        if html != last:
            await send.send(event(html or ""))
            last = html
        else:
            await send.send(": idle\n\n")
        with trio.move_on_after(IDLE_REFRESH_SECS):
            await wait_change()
        await trio.sleep_until(started + refresh_gap(cost))
