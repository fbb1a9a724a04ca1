"""The cluster's JWT key, read once at daemon start from ``[auth] jwt_key`` or ``jwt_key_file``.

Contracts:

- ``jwt_key_file`` is read as raw bytes (as Slurm reads ``jwt_hs256.key``, so both verify the same
  tokens). A file readable or writable by group or other is refused with a message naming the file and
  the fix (``chmod 600``); so is an empty or unreadable one.
- ``mode = "required"`` without a key is refused, naming the keys looked for.
- The key itself never appears in an error message or a log line; :class:`AuthSettings` hides it from
  ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spur.core.secret_file import UnreadableFile, read_config_file

if TYPE_CHECKING:
    from spur.config.model import AuthConfig

__all__ = ["AuthConfigError", "AuthSettings", "DEFAULT_BROKER_SOCKET", "load_key", "load_settings"]

DEFAULT_BROKER_SOCKET = Path("/run/spur/auth.sock")


class AuthConfigError(ValueError):
    """The ``[auth]`` section cannot be used; the message is one line naming the key and the fix."""


@dataclass(frozen=True)
class AuthSettings:
    """The ``[auth]`` section resolved for a daemon: mode, key bytes (or None) and the broker."""

    mode: str = "permissive"
    key: bytes | None = field(default=None, repr=False)
    broker_socket: Path = DEFAULT_BROKER_SOCKET
    broker_ttl_secs: int = 300
    token_ttl_secs: int = 86400
    max_token_lifespan: int = 86400

    @property
    def has_key(self) -> bool:
        return bool(self.key)


def load_key(jwt_key: str | None, jwt_key_file: Path | str | None) -> bytes | None:
    """The key from the inline value or the file (None when neither is set); raises AuthConfigError."""
    if jwt_key is not None:
        if not jwt_key:
            raise AuthConfigError("auth.jwt_key is empty")
        return jwt_key.encode()
    if jwt_key_file is None:
        return None
    try:
        return read_config_file("auth.jwt_key_file", Path(jwt_key_file), private=True)
    except UnreadableFile as exc:
        raise AuthConfigError(str(exc)) from None


def load_settings(auth_cfg: AuthConfig | None) -> AuthSettings:
    """Resolve a config ``[auth]`` section (spur.config AuthConfig); raises AuthConfigError.

    Refuses ``mode = "required"`` without a key, naming the keys it looked for.
    """
    mode = str(getattr(auth_cfg, "mode", "permissive"))
    key = load_key(getattr(auth_cfg, "jwt_key", None), getattr(auth_cfg, "jwt_key_file", None))
    if mode == "required" and not key:
        raise AuthConfigError(
            'auth.mode = "required" needs a key, but neither auth.jwt_key nor auth.jwt_key_file is set'
        )
    return AuthSettings(
        mode=mode,
        key=key,
        broker_socket=Path(getattr(auth_cfg, "broker_socket", None) or DEFAULT_BROKER_SOCKET),
        broker_ttl_secs=int(getattr(auth_cfg, "broker_ttl_secs", 300)),
        token_ttl_secs=int(getattr(auth_cfg, "token_ttl_secs", 86400)),
        max_token_lifespan=int(getattr(auth_cfg, "max_token_lifespan", 86400)),
    )
