"""systemd's readiness protocol (``sd_notify``) for ``Type=notify`` units, without libsystemd.

A service manager that wants to hear from a daemon sets ``$NOTIFY_SOCKET`` to a Unix datagram socket
(a path, or ``@name`` for an abstract one); the daemon sends newline-separated ``KEY=VALUE`` lines such
as ``READY=1`` or ``STOPPING=1``. Without ``$NOTIFY_SOCKET`` (run by hand, by tests, by another
supervisor) every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

__all__ = ["notify", "notify_address"]

log = logging.getLogger("spur.sdnotify")


def notify_address(env: Mapping[str, str]) -> str | bytes | None:
    """The socket address named by ``$NOTIFY_SOCKET`` in ``env``, or None when there is none.

    An ``@`` prefix means Linux's abstract namespace (a leading NUL byte)."""
    value = env.get("NOTIFY_SOCKET", "")
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # systemd only ever passes absolute or abstract names (vsock is not used here)


def notify(state: str, env: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to the service manager; True when it was sent.

    Never raises: a daemon must not fail because its supervisor went away."""
    address = notify_address(os.environ if env is None else env)
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError as e:
        log.warning("cannot notify the service manager (%s): %s", state.splitlines()[0], e)
        return False
    return True
