"""pluggy hook specifications: the contract between Spur and its plugins.

Plugins are separate distributions exposing an entry point in group ``spur`` named
``<kind>.<name>`` (for example ``scheduler.backfill``) whose object carries ``@hookimpl`` methods.
Only the configured plugin of each kind is registered; a configured plugin that is not installed
is a startup error naming its pip package (``spur-sched-<name>``, ``spur-cni-<name>``,
``spur-storage-<name>``).
"""

from __future__ import annotations

from typing import Any

import pluggy

from spur.core.scheduling import Plan, SchedSnapshot

PROJECT = "spur"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class SchedulerSpec:
    @hookspec(firstresult=True)
    def spur_schedule(self, snapshot: SchedSnapshot, options: dict[str, Any]) -> Plan:
        """Plan which pending jobs start now and where. Pure: must not mutate ``snapshot``."""


class CniSpec:
    @hookspec(firstresult=True)
    def spur_cni_network(self, pod_cidr: str, service_cidr: str, mtu: int) -> dict[str, Any]:
        """Return the k0s ``spec.network`` fragment for this CNI."""

    @hookspec(firstresult=True)
    def spur_cni_ports(self) -> list[tuple[int, str]]:
        """Ports (number, protocol) the CNI needs open between nodes."""


class StorageSpec:
    @hookspec(firstresult=True)
    def spur_storage_manifests(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        """Kubernetes manifests to place in the k0s manifest directory."""


KIND_PACKAGE_PREFIX = {"scheduler": "spur-sched-", "cni": "spur-cni-", "storage": "spur-storage-"}
KIND_SPECS = {"scheduler": SchedulerSpec, "cni": CniSpec, "storage": StorageSpec}
