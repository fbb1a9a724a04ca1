"""Building big REST answers without stalling the controller's event loop."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["off_loop"]

_THREAD_JOBS = 1000  # job lists longer than this are rendered off the event loop


class _GcPause:
    """Cyclic GC off while big answers are built (refcounting still frees everything): building
    10,000 job objects otherwise triggers dozens of full collections. Nested uses share one pause."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.enable()


_GC_PAUSE = _GcPause()


async def off_loop(fn: Callable[[], Any], size: int) -> Any:
    """``fn()`` for an answer of ``size`` items: in a worker thread (so Raft and the scheduler keep
    their turns) with the GC paused when it is big, inline otherwise."""
    if size <= _THREAD_JOBS:
        return fn()

    def run() -> Any:
        with _GC_PAUSE:
            return fn()

    return await trio.to_thread.run_sync(run)
