"""spur-cni-calico: bird over the mesh (API and kubelet on the mesh IP), vxlan on the underlay."""

from spur.hookspecs import CniContext
from spur.plugins import load_plugin_manager


def ctx(**kw):
    base = dict(pod_cidr="10.42.0.0/16", service_cidr="10.43.0.0/16", mtu=1420, wg_enabled=True,
                role="controller", advertise_address="10.44.0.1",
                control_plane_addresses=("10.44.0.1", "10.44.0.2", "10.44.0.3"))
    return CniContext(**{**base, **kw})


def test_bird_over_the_mesh_on_a_control_plane():
    out = load_plugin_manager("cni", "calico").hook.spur_cni_render(ctx=ctx())
    assert out.network["provider"] == "calico"
    assert out.network["calico"] == {"mode": "bird", "mtu": 1420}
    assert (out.network["podCIDR"], out.network["serviceCIDR"]) == ("10.42.0.0/16", "10.43.0.0/16")
    assert out.api_address == "10.44.0.1"
    assert out.api_sans == ("10.44.0.1", "10.44.0.2", "10.44.0.3")
    assert out.kubelet_node_ip == "10.44.0.1"


def test_bird_worker_pins_its_kubelet_to_its_mesh_ip():
    out = load_plugin_manager("cni", "calico").hook.spur_cni_render(ctx=ctx(role="worker", advertise_address="10.44.0.9"))
    assert out.kubelet_node_ip == "10.44.0.9"
    assert (out.api_address, out.api_sans) == (None, ())


def test_vxlan_on_the_underlay_without_the_mesh():
    pm = load_plugin_manager("cni", "calico")
    out = pm.hook.spur_cni_render(ctx=ctx(wg_enabled=False, advertise_address="192.0.2.10",
                                          control_plane_addresses=("192.0.2.10",)))
    assert out.network["calico"] == {"mode": "vxlan", "mtu": 1420, "vxlanPort": 4789}
    assert out.api_address == "192.0.2.10" and out.kubelet_node_ip == "192.0.2.10"
    assert [(p.protocol, p.number) for p in pm.hook.spur_cni_ports(ctx=ctx(wg_enabled=False))] == [("udp", 4789)]
    assert [(p.protocol, p.number) for p in pm.hook.spur_cni_ports(ctx=ctx())] == [("tcp", 179)]


def test_no_address_yet_leaves_api_and_kubelet_to_k0s():
    out = load_plugin_manager("cni", "calico").hook.spur_cni_render(ctx=ctx(advertise_address=None))
    assert (out.api_address, out.api_sans, out.kubelet_node_ip) == (None, (), None)
