"""Node admission tokens and credentials: format, hashing, constant-time checks, durations. Pure.

A join token is ``<id>.<secret>``: ``id`` is 6 lowercase hex digits (public: it names the token in
``spur token list`` and ``spur token revoke``), ``secret`` is 32 or more hex digits. Only
``sha256(secret)`` (hex) is ever stored; a presented secret is hashed and compared with
:func:`hmac.compare_digest`. A node credential is a random hex secret handed to one node at its
first admitted registration; it is stored the same way (hashed) and tied to the node's name.

Nothing here logs or returns a secret in an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

__all__ = [
    "CREDENTIAL_METADATA_KEY",
    "TokenFormatError",
    "format_duration",
    "hash_secret",
    "new_credential",
    "new_token",
    "parse_duration",
    "parse_token",
    "secret_matches",
]

CREDENTIAL_METADATA_KEY = "x-spur-node-credential"
ID_HEX = 6
SECRET_HEX = 32
_TOKEN = re.compile(r"^([0-9a-f]{6})\.([0-9a-f]{32,256})$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$")
_UNIT_SECS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class TokenFormatError(ValueError):
    """A join token or duration that cannot be parsed; the message never contains the secret."""


def hash_secret(secret: str) -> str:
    """Hex sha256 of ``secret`` (what the replicated state stores instead of the secret)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(stored_hash: str, presented_hash: str) -> bool:
    """Constant-time comparison of two hex hashes (False when either is empty)."""
    if not stored_hash or not presented_hash:
        return False
    return hmac.compare_digest(stored_hash.encode(), presented_hash.encode())


def parse_token(text: str) -> tuple[str, str]:
    """``"<id>.<secret>"`` -> (id, secret); raises TokenFormatError naming the expected format."""
    match = _TOKEN.match(text.strip().lower())
    if match is None:
        raise TokenFormatError(
            f"malformed join token: expected <{ID_HEX} hex id>.<{SECRET_HEX}+ hex secret> "
            "as printed by `spur token create`"
        )
    return match.group(1), match.group(2)


def new_token() -> tuple[str, str]:
    """A fresh random (id, secret) pair (the caller checks the id is not taken yet)."""
    return secrets.token_hex(ID_HEX // 2), secrets.token_hex(SECRET_HEX // 2)


def new_credential() -> str:
    """A fresh random node credential (64 hex digits)."""
    return secrets.token_hex(32)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``24h``, ``7d``, ``2w`` (also ``1.5h``) -> seconds.

    ``0`` means "never expires". Raises TokenFormatError with one clear message otherwise.
    """
    match = _DURATION.match(text.strip().lower())
    if match is None:
        raise TokenFormatError(
            f"invalid duration {text!r}: expected a number with an optional unit s, m, h, d or w "
            "(e.g. 30m, 24h, 7d; 0 = never expires)"
        )
    return float(match.group(1)) * _UNIT_SECS[match.group(2)]


def format_duration(secs: float) -> str:
    """Seconds -> a short human form (``1d2h``, ``45m``, ``10s``); ``0`` and less -> ``0s``."""
    total = int(max(0.0, secs))
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        value, total = divmod(total, size)
        if value:
            parts.append(f"{value}{unit}")
        if len(parts) == 2:
            break
    return "".join(parts)
