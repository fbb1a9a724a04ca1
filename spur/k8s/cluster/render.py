"""Rendering a node's k0s setup: the ``k0s.yaml`` of a control plane, the k0s command line, and the
manifests a control plane drops into k0s's manifest-deployer directory. Pure: no I/O.

The CNI's part comes from the configured CNI plugin (``spur_cni_render``), the storage manifests from
the configured storage plugin (``spur_storage_manifests``; none when ``storage_provisioner = "none"``).
Spur adds what does not depend on the CNI: a multi-control-plane cluster gets node-local load
balancing (EnvoyProxy) in every control plane's config, a single control plane does not; workers get
no config at all (k0s workers take theirs from the control plane).

A control plane's config is rendered once, when that control plane first starts; the agent never
rewrites it in place (see :mod:`spur.agent.k0s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from spur.hookspecs import CniContext, CniRender, Port, StorageContext

ROLES = ("single", "controller", "worker")
CONTROL_PLANE_ROLES = ("single", "controller")
MANIFEST_STACK = "spur-storage"


@dataclass(frozen=True)
class NodeRender:
    """Everything the agent writes for one node's k0s.

    ``config``: the k0s ClusterConfig (control planes only; ``None`` for workers).
    ``manifests``: k0s manifest-deployer stack name -> objects (control planes only).
    ``kubelet_node_ip``: pinned kubelet ``--node-ip`` (``None``: k0s picks).
    ``ports``: what the CNI needs open between nodes.
    """

    role: str
    config: dict[str, Any] | None
    manifests: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    kubelet_node_ip: str | None = None
    ports: tuple[Port, ...] = ()


def render_node(
    *,
    role: str,
    control_plane_count: int,
    cni: pluggy.PluginManager,
    storage: pluggy.PluginManager | None,
    pod_cidr: str,
    service_cidr: str,
    mtu: int,
    wg_enabled: bool,
    local_path_dir: str,
    advertise_address: str | None = None,
    control_plane_addresses: Sequence[str] = (),
) -> NodeRender:
    """Render the k0s setup of one node with role ``role`` in a cluster of ``control_plane_count``
    control planes. Raises ValueError for an unknown role or a non-positive count."""
    if role not in ROLES:
        raise ValueError(f"unknown k0s role {role!r} (one of {', '.join(ROLES)})")
    if control_plane_count < 1:
        raise ValueError("a cluster needs at least one control plane")
    ctx = CniContext(
        pod_cidr=pod_cidr,
        service_cidr=service_cidr,
        mtu=mtu,
        wg_enabled=wg_enabled,
        role=role,
        advertise_address=advertise_address,
        control_plane_addresses=tuple(control_plane_addresses),
    )
    cni_render: CniRender = cni.hook.spur_cni_render(ctx=ctx)
    ports = tuple(cni.hook.spur_cni_ports(ctx=ctx) or ())
    if role not in CONTROL_PLANE_ROLES:
        return NodeRender(role=role, config=None, kubelet_node_ip=cni_render.kubelet_node_ip, ports=ports)
    network = dict(cni_render.network)
    if control_plane_count > 1:
        network["nodeLocalLoadBalancing"] = {"enabled": True, "type": "EnvoyProxy"}
    spec: dict[str, Any] = {"network": network}
    if cni_render.api_address:
        spec["api"] = {"address": cni_render.api_address, "sans": list(cni_render.api_sans)}
    config = {
        "apiVersion": "k0s.k0sproject.io/v1beta1",
        "kind": "ClusterConfig",
        "metadata": {"name": "k0s"},
        "spec": spec,
    }
    manifests: dict[str, list[dict[str, Any]]] = {}
    if storage is not None:
        objects = storage.hook.spur_storage_manifests(ctx=StorageContext(local_path_dir=local_path_dir))
        if objects:
            manifests[MANIFEST_STACK] = list(objects)
    return NodeRender(
        role=role, config=config, manifests=manifests, kubelet_node_ip=cni_render.kubelet_node_ip, ports=ports
    )


def k0s_argv(
    *,
    binary: str,
    role: str,
    data_dir: str,
    config_path: str | None = None,
    token_path: str | None = None,
    kubelet_node_ip: str | None = None,
) -> list[str]:
    """The k0s command line of the node's systemd unit.

    ``single`` runs ``k0s controller --single``; a ``controller`` with a token joins an existing
    control plane (without one it bootstraps etcd); a ``worker`` always needs a token.
    """
    if role == "worker":
        if not token_path:
            raise ValueError("a k0s worker needs a join token")
        argv = [binary, "worker", "--token-file", token_path, "--data-dir", data_dir]
    elif role in CONTROL_PLANE_ROLES:
        argv = [binary, "controller"]
        if role == "single":
            argv.append("--single")
        if config_path:
            argv += ["--config", config_path]
        if token_path and role == "controller":
            argv += ["--token-file", token_path]
        argv += ["--data-dir", data_dir]
    else:
        raise ValueError(f"unknown k0s role {role!r} (one of {', '.join(ROLES)})")
    if kubelet_node_ip and role != "controller":
        argv.append(f"--kubelet-extra-args=--node-ip={kubelet_node_ip}")
    return argv
