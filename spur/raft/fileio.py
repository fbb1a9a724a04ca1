"""Small durable-file helpers used by RaftStorage. Blocking; call them from a worker thread.

Every fsync goes through ``os.fsync`` looked up at call time (tests monkeypatch it to count calls or to
inject failures). With ``sync=False`` nothing is fsync'd: data survives a process crash (it is in the page
cache) but not a power loss.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_fd(fd: int, sync: bool) -> None:
    """fsync `fd` when `sync` is true."""
    if sync:
        os.fsync(fd)


def fsync_dir(directory: Path, sync: bool) -> None:
    """fsync a directory so that creations, renames and unlinks in it are durable."""
    if not sync:
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of `data` to `fd`, continuing after short writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def truncate(path: Path, size: int, sync: bool) -> None:
    """Cut `path` back to its first `size` bytes, durably when `sync` is true."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        fsync_fd(fd, sync)
    finally:
        os.close(fd)


def atomic_write(path: Path, chunks: list[bytes], sync: bool) -> None:
    """Replace `path` with the concatenation of `chunks`, atomically and durably.

    Writes ``<path>.tmp``, fsyncs it, renames it over `path` and fsyncs the directory. A crash at any point
    leaves either the old or the new file at `path` (plus perhaps a stray ``.tmp``, removed at next load).
    On error the temporary file is removed and the OSError propagates.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            for chunk in chunks:
                write_all(fd, chunk)
            fsync_fd(fd, sync)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent, sync)
