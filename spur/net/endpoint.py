"""The node's WireGuard endpoint option (``[agent] wg_endpoint`` / ``spurd --wg-endpoint``)."""

from __future__ import annotations

import ipaddress

from spur.net.model import check_endpoint

__all__ = ["endpoint_from_address", "parse_endpoint_option"]


def endpoint_from_address(address: str, port: int) -> str:
    """``IP:PORT`` for a bare address (IPv6 bracketed)."""
    addr = ipaddress.ip_address(address.strip("[]"))
    return check_endpoint(f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}")


def parse_endpoint_option(value: str, default_port: int) -> str:
    """``IP``, ``IP:PORT``, ``[IPv6]`` or ``[IPv6]:PORT`` -> normalized ``IP:PORT``; ValueError otherwise."""
    text = value.strip()
    try:
        return endpoint_from_address(text, default_port)
    except ValueError:
        pass
    try:
        return check_endpoint(text)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address or IP:PORT (host names are not accepted)") from None
