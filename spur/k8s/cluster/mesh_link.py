"""The one place the k0s cluster reads a node's mesh IP: the ``mesh`` state domain, when present.

The WireGuard mesh (``[network] wg_enabled``) keeps node mesh addresses in a ``mesh`` state domain
offering ``address_of(node) -> str | None``. Without that domain (or without an address for the
node yet) the answer is None and k0s picks its own interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spur.state.machine import ClusterState


def mesh_ip(state: ClusterState, node: str) -> str | None:
    """The mesh IP of ``node``, or None when there is no mesh domain or no address yet."""
    domain = getattr(state, "domains", {}).get("mesh")
    if domain is None or not hasattr(domain, "address_of"):
        return None
    address = domain.address_of(node)
    return str(address) if address else None
