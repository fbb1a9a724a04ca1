"""The local credential broker: a Unix socket that hands a process a short-lived token for ITS OWN uid.

munge's model done with the JWT key: every node holds the cluster key, and the kernel tells the broker
who is connecting (SO_PEERCRED), so ``auth.mode = "required"`` works for every local user with no setup.

Protocol (one exchange per connection): the client connects and reads until EOF. The broker answers one
line: ``token <jwt>`` (the peer's uid and gid as the kernel reports them; user name from the password
database, else the uid as text; lifetime
``[auth] broker_ttl_secs``) or ``error <why>``. Nothing the client sends is read, so a client cannot
ask for anyone else's token.

Contracts: the socket is created with mode 0666 (anyone may ask; each gets only its own token); its
directory is created if missing. A path already served by a live broker (spurctld and spurd on one host
share the configured path) is left to it and this broker does not start; a stale socket file is
replaced. The socket file is removed when the broker stops. Without a key the broker is not started
(:func:`serve_broker` returns after ``task_status.started``).
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import socket
import struct
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from spur.auth.guard import ServerAuth

__all__ = ["peer_uid", "serve_broker"]

log = logging.getLogger("spur.auth.broker")

_CRED = struct.Struct("3i")


class _UnixSocket(Protocol):
    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


def peer_uid(sock: _UnixSocket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    return _CRED.unpack(raw)


def _user_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _live(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


async def serve_broker(
    auth: ServerAuth, *, task_status: trio.TaskStatus[Path | None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve the broker socket until cancelled (module docstring); reports the path, or None when not
    serving (no key, or another daemon's broker already serves the path)."""
    settings = auth.settings
    path = Path(settings.broker_socket)
    if not settings.has_key:
        log.info("credential broker not started: no auth key configured")
        task_status.started(None)
        return
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            await sock.bind(str(path))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if await trio.to_thread.run_sync(_live, path):
                log.info("credential broker socket %s is served by another Spur daemon on this host", path)
                sock.close()
                task_status.started(None)
                return
            path.unlink(missing_ok=True)
            await sock.bind(str(path))
        os.chmod(path, 0o666)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        log.warning("credential broker not started: cannot listen on %s: %s", path, exc.strerror or exc)
        task_status.started(None)
        return
    inode = path.stat().st_ino
    log.info("credential broker listening on %s (tokens live %ss)", path, settings.broker_ttl_secs)
    listener = trio.SocketListener(sock)
    try:
        task_status.started(path)
        await trio.serve_listeners(partial(_answer, auth), [listener])
    finally:
        try:
            if path.stat().st_ino == inode:
                path.unlink()
        except OSError:
            pass


async def _answer(auth: ServerAuth, stream: trio.SocketStream) -> None:
    try:
        try:
            _pid, uid, gid = peer_uid(stream.socket)
        except OSError as exc:
            reply = f"error cannot identify the connecting process: {exc.strerror or exc}\n"
        else:
            user = _user_of(uid)
            # The kernel's gid of the peer (after newgrp too), so a job may run as that group.
            token = auth.mint_for(user, uid, ttl_secs=auth.settings.broker_ttl_secs, gid=gid)
            reply = f"token {token}\n"
            log.debug("credential broker: token for %s (uid %s)", user, uid)
        with trio.move_on_after(5):
            await stream.send_all(reply.encode())
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    except Exception as exc:  # one client's failure never stops the broker
        log.warning("credential broker: answering a client failed: %s", type(exc).__name__)
    finally:
        await trio.aclose_forcefully(stream)
