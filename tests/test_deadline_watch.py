"""The deadline watch of calls a connection's reader serves: what expires, when, and how often its
task wakes (Trio's MockClock: the ticks are not waited for)."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from spur.rpc.deadline_watch import DEADLINE_TICK, SLACK, DeadlineWatch


class Wakes(trio.abc.Instrument):
    """Counts how often the watch's task is scheduled."""

    def __init__(self) -> None:
        self.count = 0

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("DeadlineWatch.run"):
            self.count += 1


def run(test) -> None:
    trio.run(test, clock=MockClock(autojump_threshold=0))


def test_an_item_expires_once_its_deadline_has_passed_and_not_before() -> None:
    async def main() -> None:
        expired: list[tuple[str, float]] = []
        watch: DeadlineWatch[str] = DeadlineWatch(
            lambda item: expired.append((item, trio.current_time())), alive=lambda item: True
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            start = trio.current_time()
            watch.watch(start + 5.0, "late")
            watch.watch(start + 1.0, "early")  # earlier than the one the task sleeps for
            await trio.sleep(0.9)
            assert expired == []
            await trio.sleep(5.0)
            assert [item for item, _ in expired] == ["early", "late"]
            assert [round(at - start, 3) for _, at in expired] == [1.0, 5.0]
            nursery.cancel_scope.cancel()

    run(main)


def test_when_every_item_is_released_nothing_expires() -> None:
    async def main() -> None:
        expired: list[str] = []
        watch: DeadlineWatch[str] = DeadlineWatch(expired.append, alive=lambda item: True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            now = trio.current_time()
            watch.watch(now + 1.0, "a")
            watch.watch(now + 2.0, "b")
            watch.release()
            assert watch.live == 1
            watch.release()
            assert watch.live == 0 and watch.due(now + 10.0) == []
            await trio.sleep(10.0)
            assert expired == []
            watch.watch(trio.current_time() + 1.0, "c")  # a later item still expires
            await trio.sleep(1.5)
            assert expired == ["c"]
            nursery.cancel_scope.cancel()

    run(main)


def test_many_short_lived_calls_wake_the_task_about_once_a_tick_not_once_each() -> None:
    """1,000 calls a second for 20 s, each with a 10 s deadline and answered at once, beside one that
    never is: the task wakes about once a tick (never once a call), and the one that outlives its
    deadline expires at most one tick late. ``expire`` also hears answered items (the watch keeps no
    per-item state; the server checks each), so only "slow" is looked at."""
    wakes = Wakes()

    async def main() -> None:
        trio.lowlevel.add_instrument(wakes)
        expired: list[tuple[str, float]] = []
        watch: DeadlineWatch[str] = DeadlineWatch(
            lambda item: expired.append((item, trio.current_time())), alive=lambda item: True
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            await trio.sleep(0)
            start = trio.current_time()
            watch.watch(start + 10.0, "slow")  # never released
            for i in range(20_000):
                watch.watch(trio.current_time() + 10.0, f"call {i}")
                watch.release()
                await trio.sleep(0.001)
            await trio.sleep(1.0)
            slow = [at for item, at in expired if item == "slow"]
            assert len(slow) == 1 and 10.0 <= slow[0] - start <= 10.0 + watch.tick + 0.002
            nursery.cancel_scope.cancel()

    run(main)
    # 21 s of run time, ticks of 50 ms: at most one wake a tick (223 when written), not 20,000
    assert wakes.count <= 21.0 / DEADLINE_TICK, wakes.count


def test_a_call_kept_waiting_forever_does_not_make_the_heap_keep_every_later_call() -> None:
    """One item never released, then 10,000 answered ones with long deadlines: the answered ones
    are dropped as the heap grows, and the waiting one still expires."""

    async def main() -> None:
        answered: set[str] = set()
        expired: list[str] = []
        watch: DeadlineWatch[str] = DeadlineWatch(expired.append, alive=lambda item: item not in answered)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            now = trio.current_time()
            watch.watch(now + 60.0, "forever")
            largest = 0
            for i in range(10_000):
                watch.watch(now + 3600.0, f"call {i}")
                answered.add(f"call {i}")
                watch.release()
                largest = max(largest, watch.size)
            assert largest <= 2 * 2 + SLACK  # two live at once at most: the waiting one and the newest
            await trio.sleep(61.0)
            assert expired == ["forever"]
            nursery.cancel_scope.cancel()

    run(main)
