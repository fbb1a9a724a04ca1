"""Pure logic of the WireGuard mesh: validation, address allocation, member sets, peer diffs.

No I/O here: the controller's reconcile task, the agent's backends and the state domain all call
these functions, and the unit tests pin them down without sockets or interfaces.

Conventions:

- Public keys are shown and stored base64 (44 characters, 32 bytes), as ``wg`` shows them; the UAPI
  codec (:mod:`spur.net.uapi`) converts to hex on the wire.
- An endpoint is ``IP:PORT`` (IPv6 as ``[addr]:port``); host names are refused because WireGuard
  takes literal addresses.
- A member's AllowedIPs are its mesh address as a /32 (/128) plus, when set, its pod CIDR (the managed
  k0s cluster running Calico over the mesh). A peer diff changes only what differs.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "MeshFull",
    "Member",
    "PeerChange",
    "PeerDiff",
    "PeerState",
    "allocate_address",
    "allowed_ips",
    "check_endpoint",
    "check_public_key",
    "desired_peers",
    "diff_peers",
    "pod_routes",
]

KEY_BYTES = 32


class MeshFull(Exception):
    """``wg_cidr`` has no free address left for a node (the message says which and what to do)."""


def check_public_key(text: str) -> str:
    """Return ``text`` if it is a base64 WireGuard public key (32 bytes); raise ValueError otherwise."""
    value = text.strip()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a WireGuard public key is 44 characters of base64 (32 bytes)") from None
    if len(raw) != KEY_BYTES or base64.b64encode(raw).decode() != value:
        raise ValueError("a WireGuard public key is 44 characters of base64 (32 bytes)")
    return value


def check_endpoint(text: str) -> str:
    """Normalize ``IP:PORT`` / ``[IPv6]:PORT``; raise ValueError for anything else (host names too)."""
    value = text.strip()
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"endpoint {text!r} is not IP:PORT with a port from 1 to 65535")
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        addr = ipaddress.ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        raise ValueError(f"endpoint {text!r} does not start with an IP address") from None
    if addr.version == 6 and not bracketed:
        raise ValueError(f"endpoint {text!r}: write an IPv6 address as [addr]:port")
    if addr.is_unspecified or addr.is_multicast:
        raise ValueError(f"endpoint {text!r} is not a unicast address")
    return f"[{addr}]:{int(port)}" if addr.version == 6 else f"{addr}:{int(port)}"


def allocate_address(cidr: str, node: str, taken: Iterable[str]) -> str:
    """The lowest host address of ``cidr`` not in ``taken`` (deterministic).

    Raises MeshFull naming the node, the range and how many addresses it holds when none is free.
    """
    net = ipaddress.ip_network(cidr, strict=True)
    held = {ipaddress.ip_address(a) for a in taken}
    for addr in net.hosts():
        if addr not in held:
            return str(addr)
    size = sum(1 for _ in net.hosts()) if net.num_addresses <= 1 << 16 else net.num_addresses
    raise MeshFull(
        f"no free mesh address for node {node}: [network] wg_cidr {cidr} has {size} usable "
        f"address(es) and all are held by other nodes; widen wg_cidr (or run spur net leave on a node "
        f"that no longer needs one)"
    )


@dataclass(frozen=True)
class Member:
    """One node of the mesh as the controller sees it."""

    node: str
    public_key: str
    endpoint: str
    address: str  # mesh IP without prefix
    pod_cidr: str = ""  # filled by the managed-k0s cluster when Calico runs over the mesh


def allowed_ips(member: Member) -> tuple[str, ...]:
    """The member's AllowedIPs: its mesh IP as a host route, then its pod CIDR when it has one."""
    addr = ipaddress.ip_address(member.address)
    out = [f"{addr}/{addr.max_prefixlen}"]
    if member.pod_cidr:
        out.append(str(ipaddress.ip_network(member.pod_cidr, strict=False)))
    return tuple(out)


@dataclass(frozen=True)
class PeerState:
    """A peer as a WireGuard device holds it (wanted or actual)."""

    public_key: str
    endpoint: str = ""
    allowed_ips: tuple[str, ...] = ()
    keepalive: int = 0
    last_handshake: float = 0.0  # unix time; 0 = never (actual state only)
    rx_bytes: int = 0
    tx_bytes: int = 0


def desired_peers(members: Iterable[Member], self_node: str, keepalive: int = 25) -> dict[str, PeerState]:
    """Public key -> wanted peer for ``self_node``: every other member, never itself (nor its own key)."""
    mine = {m.public_key for m in members if m.node == self_node}
    out: dict[str, PeerState] = {}
    for m in members:
        if m.node == self_node or m.public_key in mine:
            continue
        out[m.public_key] = PeerState(m.public_key, m.endpoint, allowed_ips(m), keepalive)
    return out


@dataclass(frozen=True)
class PeerChange:
    """Add or update one peer to exactly these settings."""

    public_key: str
    endpoint: str
    allowed_ips: tuple[str, ...]
    keepalive: int


@dataclass
class PeerDiff:
    """What turns the actual peer set into the wanted one; empty when they agree."""

    upsert: list[PeerChange] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.upsert or self.remove)


def _same(actual: PeerState, wanted: PeerState) -> bool:
    return (
        actual.endpoint == wanted.endpoint
        and sorted(actual.allowed_ips) == sorted(wanted.allowed_ips)
        and actual.keepalive == wanted.keepalive
    )


def diff_peers(actual: Mapping[str, PeerState], wanted: Mapping[str, PeerState]) -> PeerDiff:
    """Peers to add/update (sorted by key) and keys to remove (sorted), comparing endpoint, AllowedIPs
    (as a set) and keepalive; handshake and byte counters never cause a change."""
    out = PeerDiff()
    for key in sorted(wanted):
        want = wanted[key]
        have = actual.get(key)
        if have is None or not _same(have, want):
            out.upsert.append(PeerChange(key, want.endpoint, tuple(want.allowed_ips), want.keepalive))
    out.remove = sorted(k for k in actual if k not in wanted)
    return out


def pod_routes(members: Iterable[Member], self_node: str, mesh_cidr: str) -> list[str]:
    """Routes the agent points at the mesh interface: every other member's pod CIDR (mesh addresses
    are covered by the interface's own prefix)."""
    mesh = ipaddress.ip_network(mesh_cidr, strict=False)
    out = []
    for m in members:
        if m.node != self_node and m.pod_cidr:
            net = ipaddress.ip_network(m.pod_cidr, strict=False)
            if not (net.version == mesh.version and net.subnet_of(mesh)):  # type: ignore[arg-type]
                out.append(str(net))
    return sorted(set(out))
