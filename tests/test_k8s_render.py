"""Rendering a node's k0s setup through the CNI and storage plugins (spur.k8s.cluster.render)."""

from __future__ import annotations

import pytest

from spur.config.model import ClusterConfig
from spur.k8s.cluster.plugins import load_cluster_plugins
from spur.k8s.cluster.render import MANIFEST_STACK, k0s_argv, render_node
from spur.plugins import PluginNotFound


def render(role="controller", *, cni="kuberouter", storage="local-path", cps=1, wg=True, mtu=1450,
           addr="10.44.0.1", cp_addrs=("10.44.0.1",), pod="10.42.0.0/16", svc="10.43.0.0/16"):
    plugins = load_cluster_plugins(ClusterConfig(cni=cni, storage_provisioner=storage))
    return render_node(
        role=role, control_plane_count=cps, cni=plugins.cni, storage=plugins.storage, pod_cidr=pod,
        service_cidr=svc, mtu=mtu, wg_enabled=wg, local_path_dir="/var/lib/local-path-provisioner",
        advertise_address=addr, control_plane_addresses=cp_addrs,
    )


# The seed's "CNI-specific managed-k0s behavior" table, one row per test.

@pytest.mark.parametrize("cni", ["kuberouter", "calico"])
def test_row_pod_and_service_cidr_passed_to_k0s(cni):
    net = render(cni=cni, pod="10.60.0.0/16", svc="10.61.0.0/16").config["spec"]["network"]
    assert (net["podCIDR"], net["serviceCIDR"]) == ("10.60.0.0/16", "10.61.0.0/16")


def test_row_cni_mtu_ignored_by_kuberouter_emitted_by_calico():
    assert render(cni="kuberouter", mtu=1300).config == render(cni="kuberouter", mtu=1450).config
    assert render(cni="calico", mtu=1300).config["spec"]["network"]["calico"]["mtu"] == 1300


def test_row_api_address_and_sans():
    assert "api" not in render(cni="kuberouter").config["spec"]
    api = render(cni="calico", cps=3, cp_addrs=("10.44.0.1", "10.44.0.2", "10.44.0.3")).config["spec"]["api"]
    assert api == {"address": "10.44.0.1", "sans": ["10.44.0.1", "10.44.0.2", "10.44.0.3"]}
    # configured only once an advertised address is available
    assert "api" not in render(cni="calico", addr=None).config["spec"]


def test_row_kubelet_node_ip():
    assert render("worker", cni="kuberouter", addr="10.44.0.7").kubelet_node_ip is None
    assert render("worker", cni="calico", addr="10.44.0.7").kubelet_node_ip == "10.44.0.7"


def test_row_wg_enabled_selects_bird_or_vxlan_for_calico_only():
    assert render(cni="kuberouter", wg=True).config == render(cni="kuberouter", wg=False).config
    assert render(cni="calico", wg=True).config["spec"]["network"]["calico"]["mode"] == "bird"
    vx = render(cni="calico", wg=False, addr="192.0.2.1", cp_addrs=("192.0.2.1",)).config["spec"]
    assert vx["network"]["calico"]["mode"] == "vxlan" and vx["api"]["address"] == "192.0.2.1"


def test_kuberouter_full_overlay_and_ports():
    r = render(cni="kuberouter")
    assert r.config["spec"]["network"]["kuberouter"]["extraArgs"] == {"overlay-type": "full"}
    assert {(p.protocol, p.number) for p in r.ports} == {("ipip", 4), ("tcp", 179)}
    assert {(p.protocol, p.number) for p in render(cni="calico", wg=False).ports} == {("udp", 4789)}


@pytest.mark.parametrize("cps", [3, 5])
def test_multi_control_plane_gets_envoy_nllb_on_control_planes_not_workers(cps):
    for role in ("controller",):
        nllb = render(role, cps=cps).config["spec"]["network"]["nodeLocalLoadBalancing"]
        assert nllb == {"enabled": True, "type": "EnvoyProxy"}
    assert render("worker", cps=cps).config is None


@pytest.mark.parametrize("role", ["single", "controller"])
def test_single_control_plane_has_no_nllb(role):
    assert "nodeLocalLoadBalancing" not in render(role, cps=1).config["spec"]["network"]


def test_local_path_manifests_on_control_planes_only_and_none_ships_nothing():
    cp = render("controller")
    kinds = [o["kind"] for o in cp.manifests[MANIFEST_STACK]]
    assert "StorageClass" in kinds
    assert render("worker").manifests == {}
    assert render("controller", storage="none").manifests == {}


def test_missing_plugin_names_its_pip_package():
    with pytest.raises(PluginNotFound, match="pip install spur-cni-cilium"):
        load_cluster_plugins(ClusterConfig(cni="cilium"))
    with pytest.raises(PluginNotFound, match="pip install spur-storage-ceph"):
        load_cluster_plugins(ClusterConfig(storage_provisioner="ceph"))


def test_bad_role_and_count():
    with pytest.raises(ValueError, match="unknown k0s role 'master'"):
        render("master")
    with pytest.raises(ValueError, match="at least one control plane"):
        render(cps=0)


def test_k0s_argv_per_role():
    assert k0s_argv(binary="/k0s", role="single", data_dir="/d", config_path="/c.yaml") == [
        "/k0s", "controller", "--single", "--config", "/c.yaml", "--data-dir", "/d"]
    assert k0s_argv(binary="/k0s", role="controller", data_dir="/d", config_path="/c", token_path="/t") == [
        "/k0s", "controller", "--config", "/c", "--token-file", "/t", "--data-dir", "/d"]
    assert k0s_argv(binary="/k0s", role="worker", data_dir="/d", token_path="/t", kubelet_node_ip="10.44.0.5") == [
        "/k0s", "worker", "--token-file", "/t", "--data-dir", "/d", "--kubelet-extra-args=--node-ip=10.44.0.5"]
    with pytest.raises(ValueError, match="needs a join token"):
        k0s_argv(binary="/k0s", role="worker", data_dir="/d")
