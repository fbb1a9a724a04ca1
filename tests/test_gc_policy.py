"""The controller's garbage-collector policy (spur.controller.gc_policy): survivors are frozen out of
later collections, and frozen cyclic garbage is still reclaimed at the periodic thaw."""

from __future__ import annotations

import gc
import weakref

import trio

from spur.controller.gc_policy import freeze_survivors, gc_policy, thaw_and_collect


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_freeze_moves_survivors_out_and_thaw_collects_frozen_cycles() -> None:
    try:
        freeze_survivors()
        assert gc.get_freeze_count() > 0 and gc.get_count()[0] < 50  # young generations emptied into the permanent one
        # A cycle that became garbage after being frozen survives ordinary full collections...
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        freeze_survivors()
        del a, b
        gc.collect()
        assert ref() is not None
        # ...and is reclaimed by the thaw.
        assert thaw_and_collect() >= 2
        assert ref() is None
    finally:
        gc.unfreeze()


async def test_policy_loop_freezes_periodically_and_thaws_on_schedule(autojump_clock) -> None:
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: gc_policy(freeze_every=2, thaw_every=60, task_status=task_status))
            assert gc.get_freeze_count() > 0
            a, b = _Node(), _Node()
            a.other, b.other = b, a
            ref = weakref.ref(a)
            await trio.sleep(2.5)  # one tick: the pair is frozen
            del a, b  # now garbage, but frozen: full collections skip it
            gc.collect()
            assert ref() is not None
            await trio.sleep(60)  # past the thaw
            assert ref() is None
            nursery.cancel_scope.cancel()
        assert gc.get_freeze_count() == 0  # the policy unfreezes everything when it stops
    finally:
        gc.unfreeze()


async def test_policy_ticks_do_nothing_while_the_collector_is_paused(autojump_clock) -> None:
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: gc_policy(freeze_every=2, thaw_every=600, task_status=task_status))
            frozen = gc.get_freeze_count()
            keep = [_Node() for _ in range(100)]
            gc.disable()  # as spur.rest.offload pauses it while it builds a big answer
            try:
                await trio.sleep(5)  # two ticks
                assert gc.get_freeze_count() == frozen
            finally:
                gc.enable()
            await trio.sleep(2)  # the next tick freezes the survivors
            assert gc.get_freeze_count() >= frozen + len(keep)
            nursery.cancel_scope.cancel()
    finally:
        gc.enable()
        gc.unfreeze()


async def test_policy_raises_the_young_threshold_while_it_runs_and_restores_it(autojump_clock) -> None:
    before = gc.get_threshold()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: gc_policy(freeze_every=2, young_threshold=12_345, task_status=task_status)
            )
            assert gc.get_threshold() == (12_345, *before[1:])
            # A young cycle is still reclaimed by the next tick, without waiting for the threshold.
            a, b = _Node(), _Node()
            a.other, b.other = b, a
            ref = weakref.ref(a)
            del a, b
            await trio.sleep(2.5)
            assert ref() is None
            nursery.cancel_scope.cancel()
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
