"""k0s's built-in kube-router as Spur's CNI.

kube-router runs with ``overlay-type=full``: every pod packet between nodes is IPIP-encapsulated with
the node addresses outside, so clouds that drop packets with a pod source address (source/destination
checks on the NIC) still carry pod traffic. kube-router's own default (``subnet``) would send pod
packets bare between nodes of one subnet. The price is an IPIP header on same-subnet traffic.
API address, SANs and the kubelet's node IP are left to k0s's default interface selection; the mesh
setting and ``cni_mtu`` have no effect.
"""

from __future__ import annotations

from spur.hookspecs import CniContext, CniRender, Port, hookimpl


class KubeRouter:
    @hookimpl
    def spur_cni_render(self, ctx: CniContext) -> CniRender:
        return CniRender(
            network={
                "provider": "kuberouter",
                "podCIDR": ctx.pod_cidr,
                "serviceCIDR": ctx.service_cidr,
                "kuberouter": {"extraArgs": {"overlay-type": "full"}},
            }
        )

    @hookimpl
    def spur_cni_ports(self, ctx: CniContext) -> list[Port]:
        return [
            Port("ipip", 4, "kube-router IPIP tunnel between nodes (IP protocol 4)"),
            Port("tcp", 179, "kube-router BGP peering between nodes"),
        ]


plugin = KubeRouter()
