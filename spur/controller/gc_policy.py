"""Keep Python's cyclic garbage collector from pausing a controller that holds a large state.

CPython's collector scans every tracked object of the oldest generation in one go. A controller holding
30,000 jobs has about 350,000 such objects, and under a load of a few hundred jobs a second a full
collection ran every 2-3 seconds and took 100-200 ms each time (measured with ``gc.callbacks`` under
``bench.fleet --rate 450``): the whole event loop stopped for that long, which was most of the
heartbeat and submission p99 latency, and 5-8% of the controller's CPU.

The job records, node records and everything else that lives long do not form garbage cycles; they are
freed by reference counting when the state drops them, frozen or not. So every ``freeze_every``
seconds the young generations are collected and everything that survived is moved to the permanent
generation (``gc.freeze``), which later collections skip: a full collection then only scans what became
old since the last freeze. Cyclic garbage that was already old when frozen (rare: a closed connection's
objects, say) would stay until the next thaw, so every ``thaw_every`` seconds everything is unfrozen,
collected in full once, and frozen again: one full pause in that period instead of one every few seconds.

Between ticks the collector still runs on its own, every time the tracked objects allocated exceed
those freed by its first threshold. CPython's 700 suits a short script; under a steady load a controller
passed it about every second job, so its young collections ran some 45 times a second and took 3-4% of
its CPU (0.45 ms each, measured with ``gc.callbacks`` under ``bench.fleet --rate 500``): a young
generation holds whatever big containers were just built (a dict over every node, a list of launches),
and each collection walks them again. Nearly everything a call allocates is freed by reference counting
before any collection sees it, so a larger threshold only lets cyclic garbage wait a little longer: the
policy raises it to ``YOUNG_THRESHOLD`` (20,000 net allocations, a few MB at most) while it runs, and
the tick, which collects the young generations anyway, does most of that work.

While the collector is disabled (code building a big answer pauses it, as :mod:`spur.rest.offload` does
for a 10,000-job list), a tick does nothing: an explicit collection then would scan everything being
built (it was ~10% of a cold ``GET jobs``'s samples). The next enabled tick catches up.
"""

from __future__ import annotations

import gc
import logging
import time

import trio

__all__ = [
    "FREEZE_EVERY_SECS",
    "THAW_EVERY_SECS",
    "YOUNG_THRESHOLD",
    "freeze_survivors",
    "gc_policy",
    "thaw_and_collect",
]

log = logging.getLogger("spur.controller")

FREEZE_EVERY_SECS = 2.0
THAW_EVERY_SECS = 600.0
# Net tracked allocations between two automatic young collections while the policy runs (CPython: 700).
YOUNG_THRESHOLD = 20_000


def freeze_survivors() -> None:
    """Collect the young generations, then freeze what survived. (It does not count what is frozen:
    ``gc.get_freeze_count`` walks every frozen object, 8 ms for 600,000 of them, which every tick paid.)"""
    gc.collect(1)
    gc.freeze()


def thaw_and_collect() -> int:
    """Unfreeze everything, run one full collection, freeze the survivors again; objects collected."""
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


async def gc_policy(
    *,
    freeze_every: float = FREEZE_EVERY_SECS,
    thaw_every: float = THAW_EVERY_SECS,
    young_threshold: int = YOUNG_THRESHOLD,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the policy above until cancelled; everything is unfrozen and the collector's thresholds are
    as they were when it ends."""
    thresholds = gc.get_threshold()
    gc.set_threshold(young_threshold, *thresholds[1:])
    try:
        freeze_survivors()
        task_status.started()
        next_thaw = trio.current_time() + thaw_every
        while True:
            await trio.sleep(freeze_every)
            if not gc.isenabled():
                continue  # paused while a big answer is built (spur.rest.offload): not now, next tick
            if trio.current_time() >= next_thaw:
                next_thaw = trio.current_time() + thaw_every
                began = time.perf_counter()
                found = thaw_and_collect()
                if log.isEnabledFor(logging.DEBUG):  # counting the frozen objects walks them all
                    log.debug(
                        "full garbage collection: %d objects freed in %.0f ms, %d frozen",
                        found,
                        (time.perf_counter() - began) * 1000,
                        gc.get_freeze_count(),
                    )
            else:
                freeze_survivors()
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
