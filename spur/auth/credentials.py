"""The CLI's credential: found, never verified or stored here (no PyJWT, no Trio: CLI cold start matters).

Order (the first that yields a token wins):

1. ``$SLURM_JWT`` (Slurm's variable; ``scontrol token`` prints it),
2. ``$SPUR_AUTH_TOKEN``,
3. ``~/.spur/token`` (home from the password database) -- refused with a :class:`CredentialError` unless
   it is a regular file of mode 0600 owned by the caller,
4. the local credential broker at ``$SPUR_AUTH_SOCKET``, else the configured ``[auth] broker_socket``,
   else ``/run/spur/auth.sock`` (a short-lived token for this process's own uid).

Empty variables count as unset. Without any, calls carry only the claimed identity headers (enough in
``disabled`` and ``permissive`` modes). Nothing is written to disk.
"""

from __future__ import annotations

import os
import stat
from collections import namedtuple
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = [
    "Credential",
    "CredentialError",
    "DEFAULT_BROKER_SOCKET",
    "broker_token",
    "client_metadata",
    "find_credential",
]

DEFAULT_BROKER_SOCKET = "/run/spur/auth.sock"
ENV_VARS = ("SLURM_JWT", "SPUR_AUTH_TOKEN")


class CredentialError(Exception):
    """A credential source exists but may not be used; the message says why and how to fix it."""


class Credential(namedtuple("Credential", "token source", defaults=("", ""))):
    """``token`` (str) and its ``source``: "SLURM_JWT", "SPUR_AUTH_TOKEN", "~/.spur/token" or "broker".
    (collections.namedtuple: importing typing is a CLI start-up cost.)"""

    __slots__ = ()

    def __repr__(self) -> str:  # never show the token
        return f"Credential(source={self.source!r})"


def broker_token(path: str | Path, timeout: float = 3.0) -> str | None:
    """A token from the broker at ``path`` for this process, or None when no broker answers there."""
    path = str(path)
    if not os.path.exists(path):
        return None
    import _socket  # the C module: importing ``socket`` (enums, selectors) costs a CLI call ~3 ms

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    data = b""
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        while len(data) < 65536:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        sock.close()
    kind, _, value = data.decode(errors="replace").strip().partition(" ")
    return value if kind == "token" and value else None


def _home() -> Path:
    """This uid's home from the password database ($HOME may be another user's, e.g. under runuser)."""
    import pwd

    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return Path(os.path.expanduser("~"))


def _token_file(home: Path) -> Credential | None:
    path = home / ".spur" / "token"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CredentialError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CredentialError(f"{path} is not a regular file")
    if st.st_uid != os.getuid():
        raise CredentialError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})")
    if stat.S_IMODE(st.st_mode) != 0o600:
        raise CredentialError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; a token file must be private: run chmod 600 {path}"
        )
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise CredentialError(f"cannot read {path}: {exc.strerror or exc}") from None
    return Credential(token, "~/.spur/token") if token else None


def find_credential(
    env: Mapping[str, str] | None = None,
    *,
    home: str | Path | None = None,
    broker_socket: str | Path | Callable[[], str | Path | None] | None = None,
) -> Credential | None:
    """The first credential in the module's order, or None. Raises CredentialError for a token file
    that may not be used. ``broker_socket`` may be a callable, called only when the broker is asked."""
    env = os.environ if env is None else env
    for name in ENV_VARS:
        value = env.get(name, "").strip()
        if value:
            return Credential(value, name)
    home_dir = Path(home) if home is not None else _home()
    found = _token_file(home_dir)
    if found is not None:
        return found
    path: str | Path | None = env.get("SPUR_AUTH_SOCKET")
    if not path:
        path = (broker_socket() if callable(broker_socket) else broker_socket) or DEFAULT_BROKER_SOCKET
    token = broker_token(path)
    return Credential(token, "broker") if token else None


def client_metadata(
    broker_socket: str | Path | Callable[[], str | Path | None] | None = None,
) -> dict[str, str]:
    """Identity headers plus ``authorization: Bearer <token>`` when a credential is found."""
    from spur.auth.headers import process_identity_metadata

    md = process_identity_metadata()
    cred = find_credential(broker_socket=broker_socket)
    if cred is not None:
        md["authorization"] = f"Bearer {cred.token}"
    return md
