"""pluggy hook specifications: the contract between Spur and its plugins.

Plugins are separate distributions exposing an entry point in group ``spur`` named
``<kind>.<name>`` (for example ``scheduler.backfill``) whose object carries ``@hookimpl`` methods.
Only the configured plugin of each kind is registered; a configured plugin that is not installed
is a startup error naming its pip package (``spur-sched-<name>``, ``spur-cni-<name>``,
``spur-storage-<name>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pluggy

from spur.core.job import NodeAllocation
from spur.core.scheduling import PendingView, Plan, SchedSnapshot

PROJECT = "spur"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# The spec methods below are signatures only: pluggy calls the plugins' @hookimpl methods, never
# these bodies.


class SchedulerSpec:
    @hookspec(firstresult=True)
    def spur_schedule(self, snapshot: SchedSnapshot, options: dict[str, Any]) -> Plan:
        """Plan which pending jobs start now and where. Pure: must not mutate ``snapshot``."""
        raise NotImplementedError

    @hookspec(firstresult=True)
    def spur_place_now(
        self, snapshot: SchedSnapshot, job: PendingView, options: dict[str, Any]
    ) -> tuple[NodeAllocation, ...] | None:
        """Where ``job`` (not yet submitted) would start right now on the snapshot's free resources,
        or None when it does not fit now; ``snapshot.pending`` is empty and ``snapshot.nodes`` may hold
        only the nodes it could use now (available members of its partition with a free CPU). This is the immediate grant at
        submission (spur.state.immediate decides when it is asked). Pure. A plugin without this hook
        leaves every job to ``spur_schedule``."""
        raise NotImplementedError


@dataclass(frozen=True)
class CniContext:
    """What a CNI plugin renders from: the cluster settings and this node's addresses.

    ``advertise_address`` is the address the node's k0s should advertise (for calico over the mesh:
    the node's mesh IP; ``None`` when not known yet). ``control_plane_addresses`` are the
    control planes' advertised addresses (used as API SANs). Addresses are passed in: plugins do no
    I/O.
    """

    pod_cidr: str
    service_cidr: str
    mtu: int
    wg_enabled: bool
    role: str  # single | controller | worker
    advertise_address: str | None = None
    control_plane_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class CniRender:
    """A CNI plugin's answer: the k0s ``spec.network`` fragment, the API section's address and SANs
    (``None``: k0s picks the interface itself), and the kubelet's ``--node-ip`` (``None``: k0s's
    default interface selection)."""

    network: dict[str, Any]
    api_address: str | None = None
    api_sans: tuple[str, ...] = ()
    kubelet_node_ip: str | None = None


@dataclass(frozen=True)
class Port:
    """A port the CNI needs open between nodes: ``protocol`` is "tcp", "udp" or an IP protocol
    name ("ipip"); ``number`` is the port (TCP/UDP) or the IP protocol number (ipip: 4)."""

    protocol: str
    number: int
    purpose: str


@dataclass(frozen=True)
class StorageContext:
    """What a storage plugin renders from."""

    local_path_dir: str


class CniSpec:
    @hookspec(firstresult=True)
    def spur_cni_render(self, ctx: CniContext) -> CniRender:
        """Render this CNI's part of a node's k0s config. Pure."""
        raise NotImplementedError

    @hookspec(firstresult=True)
    def spur_cni_ports(self, ctx: CniContext) -> list[Port]:
        """Ports the CNI needs open between nodes (for the firewall notes and ``spur k8s status``)."""
        raise NotImplementedError


class StorageSpec:
    @hookspec(firstresult=True)
    def spur_storage_manifests(self, ctx: StorageContext) -> list[dict[str, Any]]:
        """Kubernetes objects to place in the k0s manifest-deployer directory on control planes."""
        raise NotImplementedError


KIND_PACKAGE_PREFIX = {"scheduler": "spur-sched-", "cni": "spur-cni-", "storage": "spur-storage-"}
KIND_SPECS = {"scheduler": SchedulerSpec, "cni": CniSpec, "storage": StorageSpec}
