"""spur-cni-kuberouter: full IPIP overlay, IPIP + BGP ports, nothing pinned to the mesh."""

from spur.hookspecs import CniContext, Port
from spur.plugins import load_plugin_manager


def ctx(**kw):
    base = dict(pod_cidr="10.42.0.0/16", service_cidr="10.43.0.0/16", mtu=1450, wg_enabled=True,
                role="controller", advertise_address="10.44.0.1", control_plane_addresses=("10.44.0.1",))
    return CniContext(**{**base, **kw})


def test_entry_point_renders_full_overlay_and_cidrs():
    pm = load_plugin_manager("cni", "kuberouter")
    out = pm.hook.spur_cni_render(ctx=ctx())
    assert out.network == {
        "provider": "kuberouter",
        "podCIDR": "10.42.0.0/16",
        "serviceCIDR": "10.43.0.0/16",
        "kuberouter": {"extraArgs": {"overlay-type": "full"}},
    }
    # k0s's default interface selection: no API address/SANs, no kubelet node IP, mtu and mesh ignored
    assert (out.api_address, out.api_sans, out.kubelet_node_ip) == (None, (), None)
    assert pm.hook.spur_cni_render(ctx=ctx(wg_enabled=False, mtu=9000)) == out


def test_ports_ipip_and_bgp():
    pm = load_plugin_manager("cni", "kuberouter")
    ports = pm.hook.spur_cni_ports(ctx=ctx())
    assert [(p.protocol, p.number) for p in ports] == [("ipip", 4), ("tcp", 179)]
    assert all(isinstance(p, Port) for p in ports)
