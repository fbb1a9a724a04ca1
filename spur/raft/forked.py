"""Serialize a state machine snapshot in a forked child, so the event loop never stalls on it.

A controller holding 100,000 jobs spends seconds turning its state into snapshot bytes. Done on the
event loop, that stalls every heartbeat, submission and launch for as long (the p99 latency tail of a
loaded controller). :func:`fork_snapshot` forks instead: the child owns a copy-on-write image of the
state exactly as it is at the fork (no later command can reach it, so the snapshot is consistent at the
applied index of that moment), serializes it, writes the bytes to a pipe and exits; the parent keeps
applying entries and only reads the pipe as data arrives.

The child runs no Trio code and keeps no file descriptor of the parent but its end of the pipe
(stdin/stdout/stderr become /dev/null): signal handlers go back to the defaults (a Ctrl-C to the process group must not reach the parent's wakeup fd) and it leaves
with ``os._exit``, so neither atexit handlers nor buffered output of the parent run twice.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import trio

__all__ = ["ChildSnapshot", "ChildSnapshotError", "fork_snapshot"]

_READ = 1 << 20
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux); absent from the fcntl module before Python 3.10


class ChildSnapshotError(RuntimeError):
    """The child could not produce the snapshot (its exit status says how it ended)."""


def _run_child(write_fd: int, serialize: Callable[[], bytes]) -> None:
    """In the child: serialize, write everything, exit 0; any failure exits 1. Never returns."""
    code = 1
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        # Hold nothing of the parent's open (its sockets, and the pipes of whoever waits for its
        # stdout to close): only the pipe back to it.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, 1 << 20)
        data = serialize()
        view = memoryview(data)
        while view:
            written = os.write(write_fd, view)
            view = view[written:]
        code = 0
    except BaseException:  # noqa: BLE001 - the status code is the whole report; the parent logs it
        code = 1
    finally:
        os._exit(code)


class ChildSnapshot:
    """A child forked by :func:`fork_snapshot`, serializing; :meth:`result` collects its bytes."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self.pid = pid
        self._read_fd = read_fd

    async def result(self) -> bytes:
        """The child's bytes once it has exited successfully.

        Raises :class:`ChildSnapshotError` when the child failed. If the caller is cancelled meanwhile,
        the child is killed and reaped."""
        chunks: list[bytes] = []
        reaped = False
        try:
            async with trio.lowlevel.FdStream(self._read_fd) as pipe:
                while True:
                    chunk = await pipe.receive_some(_READ)
                    if not chunk:
                        break
                    chunks.append(chunk)
            _, status = await trio.to_thread.run_sync(os.waitpid, self.pid, 0)
            reaped = True
        finally:
            if not reaped:
                with trio.CancelScope(shield=True):
                    try:
                        os.kill(self.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    await trio.to_thread.run_sync(os.waitpid, self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise ChildSnapshotError(f"the snapshot child exited with status {code}")
        return b"".join(chunks)


def fork_snapshot(serialize: Callable[[], bytes]) -> ChildSnapshot:
    """Fork now; the child runs ``serialize()`` on the state as it is at this call and pipes the bytes
    back. Synchronous on purpose: nothing can change the state between the call and the fork. Raises
    OSError when the process cannot be forked (nothing is left behind then)."""
    read_fd, write_fd = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(write_fd, _F_SETPIPE_SZ, _PIPE_SIZE)  # fewer wake-ups for the parent's reads
    except OSError:
        pass
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # the child
        os.close(read_fd)
        _run_child(write_fd, serialize)
    os.close(write_fd)
    return ChildSnapshot(pid, read_fd)
