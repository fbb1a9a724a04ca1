"""Writing a file that holds a secret or must never be seen half-written (node credential, k0s config
and join token, CDI specs): atomically, with its mode set from the first byte."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text``: written to a temp file created with ``mode`` (so no other user can
    open it in between), fsync'd, then renamed over ``path``. Blocking."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed the mode os.open applied
        data = memoryview(text.encode())
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
