"""Parsing of ``host:port`` network addresses as written in spur.conf and on command lines."""

from __future__ import annotations

import ipaddress
import re

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$"
)


class AddressError(ValueError):
    """An address string is not ``host[:port]``; the message says what is wrong."""


def _check_port(text: str, original: str) -> int:
    if not text.isdigit():
        raise AddressError(f"invalid port {text!r} in address {original!r}")
    port = int(text)
    if port > 65535:
        raise AddressError(f"port {port} out of range 0-65535 in address {original!r}")
    return port


def parse_addr(s: str, default_port: int) -> tuple[str, int]:
    """Split an address into ``(host, port)``.

    Accepts ``host:port``, ``host``, ``[v6]:port``, ``[v6]``, a bare IPv6 literal (``::1``) and
    URL forms (``http://host:port``, a trailing ``/`` path is ignored). ``default_port`` is used when
    no port is given. IPv6 hosts are returned without brackets. Port 0 is allowed (bind to any
    free port). Raises ``AddressError`` (a ``ValueError``) for anything else.
    """
    original = s
    s = s.strip()
    m = _SCHEME.match(s)
    if m:
        s = s[m.end() :]
        s = s.split("/", 1)[0]
    if not s:
        raise AddressError(f"empty address {original!r}")
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise AddressError(f"unclosed '[' in address {original!r}")
        host, rest = s[1:end], s[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"invalid IPv6 address {host!r} in {original!r}") from None
        if not rest:
            return host, default_port
        if not rest.startswith(":"):
            raise AddressError(f"unexpected {rest!r} after ']' in address {original!r}")
        return host, _check_port(rest[1:], original)
    if s.count(":") > 1:
        try:
            ipaddress.IPv6Address(s)
        except ValueError:
            raise AddressError(
                f"invalid address {original!r} (write IPv6 addresses with a port as [addr]:port)"
            ) from None
        return s, default_port
    host, sep, port_text = s.partition(":")
    if not host:
        raise AddressError(f"missing host in address {original!r}")
    if not _HOSTNAME.match(host):
        raise AddressError(f"invalid host name {host!r} in address {original!r}")
    return host, (_check_port(port_text, original) if sep else default_port)
