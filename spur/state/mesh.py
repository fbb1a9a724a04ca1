"""State domain ``mesh``: the WireGuard mesh membership (mesh IPs, public keys, endpoints, pod CIDRs).

Entries are per node. The leader allocates a node's mesh IP from ``[network] wg_cidr`` (stamped into
:class:`JoinMesh`); the apply picks the lowest free address of that range, so every controller
agrees, and an address is never handed to another node while a node holds it. :class:`LeaveMesh`
releases it. Public keys and endpoints are published by the agents (``spur net join``); a malformed
key or endpoint is rejected here too (INVALID_ARGUMENT), whatever the caller checked.

The member set pushed to agents (:meth:`MeshDomain.members`) is every entry with a public key whose
node is still in the inventory (``self.state.nodes``): a node removed from the inventory drops out of
every peer list at the next reconcile, and its address is released by the leader (LeaveMesh).

For the managed k0s cluster (issue 14):

- :meth:`MeshDomain.address_of` ``(node) -> str | None``: the node's mesh IP without prefix.
- :class:`SetMeshPodCidr` ``(node, pod_cidr)``: attach (or with ``""`` clear) a pod CIDR to a meshed
  node; propose it through the leader like any command (``await ctl.propose(SetMeshPodCidr(...))``).
  It becomes part of that member's AllowedIPs (and a route on every other node) at the next reconcile.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from spur.core.serde import from_plain, to_plain
from spur.net.model import Member, MeshFull, allocate_address, check_endpoint, check_public_key
from spur.state.domain import Rejected, StateDomain, StateQueries

__all__ = ["JoinMesh", "LeaveMesh", "MeshDomain", "MeshEntry", "SetMeshPodCidr"]


@dataclass
class MeshEntry:
    node: str
    address: str
    public_key: str = ""
    endpoint: str = ""
    pod_cidr: str = ""
    joined: float = 0.0
    key_changed: float = 0.0


@dataclass
class JoinMesh:
    """Give ``node`` a mesh address from ``cidr`` (keeping the one it holds when it lies inside) and
    record its public key and endpoint. Empty key/endpoint: only allocate."""

    node: str
    cidr: str
    public_key: str
    endpoint: str
    time: float


@dataclass
class LeaveMesh:
    """Forget ``node``'s mesh entry and release its address (no-op when it has none)."""

    node: str
    time: float


@dataclass
class SetMeshPodCidr:
    """Attach ``pod_cidr`` (``""`` clears it) to ``node``'s member entry (the managed k0s cluster)."""

    node: str
    pod_cidr: str


class MeshDomain(StateDomain):
    """Mesh entries by node name (see the module docstring)."""

    name = "mesh"
    commands = (JoinMesh, LeaveMesh, SetMeshPodCidr)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.entries: dict[str, MeshEntry] = {}
        self.version = 0  # bumped by every change: the reconcile task skips nothing on it, tests read it

    # ------------------------------------------------------------------ queries

    def address_of(self, node: str) -> str | None:
        """``node``'s mesh IP without prefix, or None when it holds none."""
        entry = self.entries.get(node)
        return entry.address if entry is not None else None

    def entry(self, node: str) -> MeshEntry | None:
        return self.entries.get(node)

    def members(self) -> list[Member]:
        """Every published entry whose node is still in the inventory, in node-name order."""
        nodes = self.state.nodes
        return [
            Member(e.node, e.public_key, e.endpoint, e.address, e.pod_cidr)
            for name, e in sorted(self.entries.items())
            if e.public_key and e.endpoint and name in nodes
        ]

    def departed(self) -> list[str]:
        """Nodes holding an address that are no longer in the inventory (the leader releases them)."""
        return sorted(n for n in self.entries if n not in self.state.nodes)

    # ------------------------------------------------------------------ commands

    def _apply_JoinMesh(self, cmd: JoinMesh) -> Any:
        if cmd.node not in self.state.nodes:
            return Rejected("NOT_FOUND", f"node {cmd.node} is not registered; start its spurd first")
        try:
            key = check_public_key(cmd.public_key) if cmd.public_key else ""
            endpoint = check_endpoint(cmd.endpoint) if cmd.endpoint else ""
            net = ipaddress.ip_network(cmd.cidr, strict=True)
        except ValueError as exc:
            return Rejected("INVALID_ARGUMENT", f"node {cmd.node}: {exc}")
        entry = self.entries.get(cmd.node)
        if entry is None or ipaddress.ip_address(entry.address) not in net:
            taken = (e.address for n, e in self.entries.items() if n != cmd.node)
            try:
                address = allocate_address(cmd.cidr, cmd.node, taken)
            except MeshFull as exc:
                return Rejected("RESOURCE_EXHAUSTED", str(exc))
            pod = entry.pod_cidr if entry is not None else ""
            entry = MeshEntry(cmd.node, address, pod_cidr=pod, joined=cmd.time)
            self.entries[cmd.node] = entry
        if key and key != entry.public_key:
            entry.public_key, entry.key_changed = key, cmd.time
        if endpoint:
            entry.endpoint = endpoint
        self.version += 1
        return entry

    def _apply_LeaveMesh(self, cmd: LeaveMesh) -> Any:
        gone = self.entries.pop(cmd.node, None)
        if gone is not None:
            self.version += 1
        return gone is not None

    def _apply_SetMeshPodCidr(self, cmd: SetMeshPodCidr) -> Any:
        entry = self.entries.get(cmd.node)
        if entry is None:
            return Rejected("NOT_FOUND", f"node {cmd.node} has no mesh address (spur net join on it first)")
        pod = ""
        if cmd.pod_cidr:
            try:
                pod = str(ipaddress.ip_network(cmd.pod_cidr, strict=True))
            except ValueError as exc:
                return Rejected("INVALID_ARGUMENT", f"pod CIDR for node {cmd.node}: {exc}")
        entry.pod_cidr = pod
        self.version += 1
        return entry

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> Any:
        return {"entries": [to_plain(self.entries[n]) for n in sorted(self.entries)]}

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.entries = {e["node"]: from_plain(MeshEntry, e) for e in body.get("entries", [])}
        self.version += 1
