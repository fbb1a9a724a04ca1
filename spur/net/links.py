"""Links, addresses and routes of the mesh interface through pyroute2 (rtnetlink), in worker threads.

pyroute2's socket calls block, so every function here is synchronous and the async wrappers run it
with ``trio.to_thread.run_sync``. Routes the mesh installs carry their own protocol number
(:data:`ROUTE_PROTO`), so pruning never touches a route someone else added.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any, Protocol

import trio

__all__ = [
    "ROUTE_PROTO",
    "create_kernel_link",
    "delete_link",
    "link_index",
    "link_info",
    "set_address_and_up",
    "sync_routes",
]

ROUTE_PROTO = 111  # rtnetlink protocol number marking routes spurd installed for the mesh
MTU = 1420  # WireGuard's default: 1500 minus its IPv4/IPv6 + UDP + WireGuard overhead


def _ipr() -> Any:
    from pyroute2 import IPRoute

    return IPRoute()


class _LinkTable(Protocol):
    """What is read of pyroute2's ``IPRoute`` (untyped): interface indexes by name."""

    def link_lookup(self, *, ifname: str) -> list[int]: ...


def _index(ipr: _LinkTable, ifname: str) -> int | None:
    found = ipr.link_lookup(ifname=ifname)
    return found[0] if found else None


def _link_index(ifname: str) -> int | None:
    with _ipr() as ipr:
        return _index(ipr, ifname)


async def link_index(ifname: str) -> int | None:
    """The interface's index, or None when it does not exist."""
    return await trio.to_thread.run_sync(_link_index, ifname)


def _link_info(ifname: str) -> tuple[bool, list[str]]:
    with _ipr() as ipr:
        idx = _index(ipr, ifname)
        if idx is None:
            return False, []
        link = ipr.get_links(idx)[0]
        up = bool(link["flags"] & 1)
        addrs = [f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}" for a in ipr.get_addr(index=idx)]
        return up, sorted(addrs)


async def link_info(ifname: str) -> tuple[bool, list[str]] | None:
    """(administratively up, addresses with prefix) of the interface, or None when it is missing."""
    if await link_index(ifname) is None:
        return None
    return await trio.to_thread.run_sync(_link_info, ifname)


def _set_address_and_up(ifname: str, address: str, prefixlen: int) -> None:
    with _ipr() as ipr:
        idx = _index(ipr, ifname)
        if idx is None:
            raise OSError(f"interface {ifname} does not exist")
        wanted = (address, prefixlen)
        family = ipaddress.ip_address(address).version
        for a in ipr.get_addr(index=idx):
            have = (a.get_attr("IFA_ADDRESS"), a["prefixlen"])
            other = ipaddress.ip_address(have[0])
            # Only another address of the mesh's family goes; IPv6 link-local addresses stay.
            if have != wanted and other.version == family and not other.is_link_local:
                ipr.addr("del", index=idx, address=have[0], prefixlen=have[1])
        if not any((a.get_attr("IFA_ADDRESS"), a["prefixlen"]) == wanted for a in ipr.get_addr(index=idx)):
            ipr.addr("add", index=idx, address=address, prefixlen=prefixlen)
        ipr.link("set", index=idx, mtu=MTU, state="up")


async def set_address_and_up(ifname: str, address: str, prefixlen: int) -> None:
    """Give the interface this address (removing any other of its family but link-local ones) and
    bring it up."""
    await trio.to_thread.run_sync(_set_address_and_up, ifname, address, prefixlen)


def _sync_routes(ifname: str, cidrs: list[str]) -> None:
    with _ipr() as ipr:
        idx = _index(ipr, ifname)
        if idx is None:
            return
        wanted = {str(ipaddress.ip_network(c)) for c in cidrs}
        have: set[str] = set()
        for family in (2, 10):
            for r in ipr.get_routes(family=family, oif=idx):
                if r["proto"] != ROUTE_PROTO:
                    continue
                dst = f"{r.get_attr('RTA_DST')}/{r['dst_len']}"
                if dst in wanted:
                    have.add(dst)
                else:
                    ipr.route("del", dst=dst, oif=idx, proto=ROUTE_PROTO)
        for dst in sorted(wanted - have):
            ipr.route("replace", dst=dst, oif=idx, proto=ROUTE_PROTO)


async def sync_routes(ifname: str, cidrs: Iterable[str]) -> None:
    """Routes through the interface for exactly ``cidrs`` (among the routes marked as the mesh's)."""
    await trio.to_thread.run_sync(_sync_routes, ifname, list(cidrs))


def _delete_link(ifname: str) -> bool:
    with _ipr() as ipr:
        idx = _index(ipr, ifname)
        if idx is None:
            return False
        ipr.link("del", index=idx)
        return True


async def delete_link(ifname: str) -> bool:
    """Delete the interface; False when it did not exist."""
    return await trio.to_thread.run_sync(_delete_link, ifname)


def _create_kernel_link(ifname: str) -> None:
    with _ipr() as ipr:
        if _index(ipr, ifname) is None:
            ipr.link("add", ifname=ifname, kind="wireguard")


async def create_kernel_link(ifname: str) -> None:
    """Create a kernel WireGuard interface (needs the wireguard module)."""
    await trio.to_thread.run_sync(_create_kernel_link, ifname)
