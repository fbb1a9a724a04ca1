"""Calico as Spur's CNI, in one of two modes chosen by ``network.wg_enabled``.

- Mesh enabled: ``bird`` (BGP, no overlay). The API is advertised on the control plane's mesh IP
  (with the control planes' mesh IPs as SANs) and each kubelet's ``--node-ip`` is pinned to the
  node's mesh IP, so pod traffic is routed over the WireGuard mesh.
- Mesh disabled: ``vxlan`` (Calico's own overlay, UDP 4789) on the nodes' underlay addresses.

In both modes the advertised address (once known) is the API address and the kubelet node IP, and
``cni_mtu`` is written into the Calico configuration.
"""

from __future__ import annotations

from spur.hookspecs import CniContext, CniRender, Port, hookimpl

VXLAN_PORT = 4789


class Calico:
    @hookimpl
    def spur_cni_render(self, ctx: CniContext) -> CniRender:
        mode = "bird" if ctx.wg_enabled else "vxlan"
        calico: dict = {"mode": mode, "mtu": ctx.mtu}
        if mode == "vxlan":
            calico["vxlanPort"] = VXLAN_PORT
        address = ctx.advertise_address
        controller = ctx.role in ("single", "controller")
        sans: tuple[str, ...] = ()
        if controller and address:
            sans = tuple(dict.fromkeys([address, *ctx.control_plane_addresses]))
        return CniRender(
            network={
                "provider": "calico",
                "podCIDR": ctx.pod_cidr,
                "serviceCIDR": ctx.service_cidr,
                "calico": calico,
            },
            api_address=address if controller else None,
            api_sans=sans,
            kubelet_node_ip=address,
        )

    @hookimpl
    def spur_cni_ports(self, ctx: CniContext) -> list[Port]:
        if ctx.wg_enabled:
            return [Port("tcp", 179, "Calico BGP (bird) between nodes, over the mesh")]
        return [Port("udp", VXLAN_PORT, "Calico VXLAN overlay between nodes")]


plugin = Calico()
