"""parse_addr: the address forms spur.conf and command lines accept."""

from __future__ import annotations

import pytest

from spur.config import AddressError, parse_addr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ctl1:6817", ("ctl1", 6817)),
        ("ctl1", ("ctl1", 9)),
        ("0.0.0.0:6817", ("0.0.0.0", 6817)),
        ("[::1]:6817", ("::1", 6817)),
        ("[::1]", ("::1", 9)),
        ("::1", ("::1", 9)),
        ("http://h.example.com:8080", ("h.example.com", 8080)),
        ("https://h/", ("h", 9)),
        (
            "spurctld-0.spurctld.spur.svc.cluster.local:6821",
            ("spurctld-0.spurctld.spur.svc.cluster.local", 6821),
        ),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        (" ctl:1 ", ("ctl", 1)),
    ],
)
def test_valid(text: str, expected: tuple[str, int]) -> None:
    assert parse_addr(text, 9) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty address"),
        (":6817", "missing host"),
        ("ctl:", "invalid port"),
        ("ctl:http", "invalid port"),
        ("ctl:70000", "out of range"),
        ("[::1", "unclosed"),
        ("[nothost]:1", "invalid IPv6"),
        ("[::1]6817", "after ']'"),
        ("a:b:c", "write IPv6 addresses"),
        ("bad host:1", "invalid host name"),
        ("-ctl:1", "invalid host name"),
    ],
)
def test_invalid(text: str, reason: str) -> None:
    with pytest.raises(AddressError, match=reason):
        parse_addr(text, 9)


def test_address_error_is_a_value_error() -> None:
    assert issubclass(AddressError, ValueError)
