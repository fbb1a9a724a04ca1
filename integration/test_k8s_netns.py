"""The walk-through on three network-namespace hosts: each runs a real spurd (and, under it, the
systemd and k0s doubles) at its own address; spurctld runs on the host side of a bridge. ``spur k8s
up`` goes down -> provisioning -> ready with live ``spur k8s status`` output, and the workers join
the control plane over the bridge, at the control plane's own address. Namespace and bridge names
are unique per run and removed afterwards."""

from __future__ import annotations

import json
import secrets
import subprocess
from dataclasses import dataclass

import pytest

from integration.ha_harness import netns_available
from integration.harness import Cluster, free_port, wait_for
from integration.k0s_harness import K0sHost, cleanup_hosts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not netns_available(), reason="needs root and ip netns"),
]


def ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


@dataclass
class BridgedCluster(Cluster):
    """A Cluster whose spurctld listens on the bridge address the namespaces reach."""

    bridge_ip: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.bridge_ip}:{self.port}"

    def _controller_up(self) -> bool:
        import socket

        if self.controller and not self.controller.alive():
            raise AssertionError(f"spurctld exited:\n{self.controller.log()}")
        try:
            with socket.create_connection((self.bridge_ip, self.port), timeout=0.5):
                return True
        except OSError:
            return False


@pytest.fixture
def net(tmp_path):
    token = secrets.token_hex(2)
    subnet = f"10.{150 + int(token[:2], 16) % 40}.{int(token[2:], 16) % 250}"
    bridge = f"skb{token}"
    names = [f"sk{token}{c}" for c in "abc"]
    made: list[str] = []
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, ns in enumerate(names):
            ip("netns", "add", ns)
            made.append(ns)
            ip("link", "add", f"{ns}v", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", f"{ns}v", "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{subnet}.{11 + i}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield subnet, names
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def test_three_netns_hosts_down_provisioning_ready(tmp_path, net):
    subnet, namespaces = net
    (tmp_path / "ctl").mkdir()
    cluster = BridgedCluster(tmp_path / "ctl", conf_extra="[cluster]\nenabled = true\n", port=free_port(),
                             bridge_ip=f"{subnet}.1")
    cluster.start_controller()
    hosts: list[K0sHost] = []
    try:
        for i, ns in enumerate(namespaces):
            addr = f"{subnet}.{11 + i}"
            hosts.append(K0sHost(name=f"host{i + 1}", root=tmp_path / f"host{i + 1}", cluster=cluster, port=6818,
                                 netns=ns, host_ip=addr, extra_env={"FAKE_K0S_ADDRESS": addr,
                                                                    "FAKE_K0S_JOIN_PORT": "9443"}).start())
        cluster.wait_nodes("host1", "host2", "host3")
        before = cluster.cli("spur", "k8s", "status").stdout
        assert before.startswith("phase: down")

        r = cluster.cli("spur", "k8s", "up", timeout=180)
        out = r.stdout
        assert out.index("phase: provisioning") < out.index("phase: ready"), out
        status = cluster.cli("spur", "k8s", "status").stdout
        lines = {line.split()[0]: line.split()[1:4] for line in status.splitlines() if line.startswith("  ")}
        assert lines == {
            "host1": ["controller", "active", "enabled=true"],
            "host2": ["worker", "active", "enabled=true"],
            "host3": ["worker", "active", "enabled=true"],
        }, status
        # the workers joined the control plane at its own namespace address
        cp = hosts[0]
        assert json.loads((cp.data_dir / "fake/controller.json").read_text())["join_url"] == f"http://{subnet}.11:9443"
        assert sorted(j["role"] for j in cp.joined()) == ["worker", "worker"]
        wait_for(lambda: "k0s worker started" in hosts[1].unit_output())
    finally:
        cleanup_hosts(hosts)
        cluster.stop()
