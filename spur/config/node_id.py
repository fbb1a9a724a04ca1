"""Which Raft member this controller is: ``resolve_node_id``."""

from __future__ import annotations

import ipaddress
import re

from spur.config.addr import parse_addr
from spur.config.errors import ConfigError
from spur.config.model import SpurConfig

_ORDINAL = re.compile(r"-(\d+)$")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _first_label(host: str) -> str:
    return host if _is_ip(host) else host.split(".", 1)[0]


def resolve_node_id(cfg: SpurConfig, hostname: str) -> int:
    """This controller's 1-based Raft id.

    In order: an explicit ``controller.node_id`` (must be within 1..len(peers), or 1 with no
    peers); with no peers, 1; the position of the peer whose host is ``hostname`` (exact match,
    case-insensitive), else whose first DNS label matches (peer
    ``spurctld-0.spurctld.spur.svc.cluster.local`` matches ``spurctld-0``; peer ``ctl1`` matches
    ``ctl1.example.com``); else the hostname's StatefulSet ordinal (``spurctld-2`` -> 3).
    Raises ``ConfigError`` when the hostname matches several peers, matches none and has no
    ordinal, or the result is outside 1..len(peers).
    """
    ctl = cfg.controller
    peers = ctl.peers
    listing = ", ".join(f"{i}={p}" for i, p in enumerate(peers, 1))
    if ctl.node_id is not None:
        limit = max(len(peers), 1)
        if not 1 <= ctl.node_id <= limit:
            raise ConfigError.single(
                cfg.source,
                "controller.node_id",
                ctl.node_id,
                f"must be in 1..{limit} (peers: {listing or 'none'})",
            )
        return ctl.node_id
    if not peers:
        return 1

    name = hostname.strip().rstrip(".").lower()
    hosts = [parse_addr(p, 6821)[0].rstrip(".").lower() for p in peers]
    exact = [i for i, h in enumerate(hosts, 1) if h == name]
    short = [
        i
        for i, h in enumerate(hosts, 1)
        if not _is_ip(name) and (_first_label(h) == name or h == _first_label(name))
    ]
    for matches in (exact, short):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            which = ", ".join(peers[i - 1] for i in matches)
            raise ConfigError.single(
                cfg.source,
                "controller.peers",
                list(peers),
                f"hostname {hostname!r} matches several peers ({which}); set controller.node_id",
            )

    m = _ORDINAL.search(_first_label(name))
    if not m:
        raise ConfigError.single(
            cfg.source,
            "controller.peers",
            list(peers),
            f"hostname {hostname!r} matches no peer and has no -N ordinal; set controller.node_id",
        )
    node_id = int(m.group(1)) + 1
    if node_id > len(peers):
        raise ConfigError.single(
            cfg.source,
            "controller.peers",
            list(peers),
            f"hostname {hostname!r} has ordinal {node_id - 1}, giving node id {node_id}, "
            f"but there are only {len(peers)} peers; set controller.node_id",
        )
    return node_id
