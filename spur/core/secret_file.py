"""Reading a configured key or certificate file with the checks every daemon makes before trusting it.

Pure of any daemon: the caller names the setting (``tls.key_file``, ``auth.jwt_key_file``) and gets
back the bytes or one :class:`UnreadableFile` whose message names that setting, the path and the fix.
"""

from __future__ import annotations

import stat
from pathlib import Path


class UnreadableFile(ValueError):
    """The file cannot be used; ``str()`` is the one-line reason, naming the setting and the path."""


def read_config_file(setting: str, path: Path, *, private: bool = False) -> bytes:
    """Return the contents of ``path``, configured as ``setting``.

    Refuses (UnreadableFile) a path that cannot be read, is not a regular file or holds only
    whitespace; with ``private``, also one that group or other may read (a secret such as a private
    key or an HMAC key), telling the operator to ``chmod 600`` it.
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise UnreadableFile(f"{setting} {path}: cannot read it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(f"{setting} {path}: not a regular file")
    if private and st.st_mode & 0o077:
        raise UnreadableFile(
            f"{setting} {path} is readable by group/other (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"run chmod 600 {path}"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableFile(f"{setting} {path}: cannot read it: {exc.strerror or exc}") from None
    if not data.strip():
        raise UnreadableFile(f"{setting} {path} is empty")
    return data
