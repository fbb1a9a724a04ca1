"""``[accounting] database_url`` handling: parse it and keep its password out of every message (pure)."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

__all__ = ["DatabaseUrlError", "check_database_url", "redact", "redact_url"]

_USERINFO = re.compile(r"(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@")
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


class DatabaseUrlError(ValueError):
    """The URL cannot be used; the message never contains the password."""


def redact_url(url: str) -> str:
    """``postgresql://spur:secret@db/spur`` -> ``postgresql://spur:***@db/spur``."""
    return redact(url, url)


def redact(text: str, url: str | None = None) -> str:
    """``text`` with the password of ``url`` (and any URL/keyword password) replaced by ``***``."""
    out = _USERINFO.sub(r"\1:***@", text)
    out = _PASSWORD_KV.sub(r"\1***", out)
    if url:
        try:
            password = urlsplit(url).password
        except ValueError:
            password = None
        for secret in {password, unquote(password) if password else None}:
            if secret and len(secret) >= 3:
                out = out.replace(secret, "***")
    return out


def check_database_url(url: str) -> None:
    """Raise :class:`DatabaseUrlError` when ``url`` is not a usable postgresql:// URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DatabaseUrlError(
            f"database_url {redact_url(url)} does not parse: {redact(str(exc), url)}"
        ) from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise DatabaseUrlError(f"database_url {redact_url(url)} is not a postgresql:// URL")
    if port is not None and not 0 < port < 65536:
        raise DatabaseUrlError(f"database_url {redact_url(url)} has an invalid port")
    try:
        from psycopg.conninfo import conninfo_to_dict

        conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq's own parser refused it
        raise DatabaseUrlError(
            f"database_url {redact_url(url)} does not parse: {redact(str(exc), url)}"
        ) from None
