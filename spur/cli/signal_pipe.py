"""Signals for a blocking command loop: noted by handlers, woken through a pipe that select() watches.

srun and salloc follow a job with :func:`spur.rpc.blocking.wait_readable` instead of an event loop.
A signal must then neither interrupt a half-done socket operation (as a raised KeyboardInterrupt
would) nor wait until the next message arrives. :class:`SignalPipe` installs handlers that only record
the signal, and points :func:`signal.set_wakeup_fd` at a pipe whose read end goes into the select set:
the loop wakes at once and acts on :meth:`SignalPipe.take` between two whole operations.

Contract: inside ``with SignalPipe(SIGINT, SIGTERM) as signals`` those signals no longer have their
default effect; ``signals.fileno()`` turns readable when one arrives; ``signals.take()`` returns the
signals received since the last call, in order (and empties the pipe). Leaving the block puts back the
previous handlers and wake-up fd. Main thread only (a rule of :mod:`signal`).
"""

from __future__ import annotations

import os
import signal
from types import FrameType, TracebackType

__all__ = ["SignalPipe"]


class SignalPipe:
    """Record ``signums`` while the block runs; see the module docstring."""

    def __init__(self, *signums: int) -> None:
        self.signums = signums
        self._received: list[int] = []
        self._read = self._write = -1
        self._old_handlers: dict[int, object] = {}
        self._old_wakeup = -1

    def __enter__(self) -> SignalPipe:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._old_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in self.signums:
            self._old_handlers[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]  # what signal.signal returned
        self._old_handlers.clear()
        signal.set_wakeup_fd(self._old_wakeup)
        os.close(self._read)
        os.close(self._write)

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        self._received.append(signum)

    def fileno(self) -> int:
        return self._read

    def take(self) -> list[int]:
        """The signals received since the last call (oldest first)."""
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass
        taken, self._received = self._received, []
        return taken
