"""The WireGuard mesh on real tunnels: wireguard-go in network-namespace hosts, real spurctld/spurd.

Three hosts (network namespaces on a per-run bridge), each with its own spurd; spurctld runs in the
root namespace and listens on the bridge. ``spur net join`` on each host, then every host pings every
other over spur0; the failures the leader's reconcile must heal are then injected one by one.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from integration.harness import wait_for
from integration.mesh_hosts import BridgeCluster, Host, Hosts, netns_available

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(netns_available() is not None, reason=f"mesh tests: {netns_available()}"),
]

MESH_CONF = """
[network]
wg_enabled = true
wg_cidr = "10.44.0.0/24"
wg_reconcile_interval_secs = 1
"""


def mesh_conf(root: Path) -> str:
    """The mesh settings, and a credential broker path of this test's own (never /run/spur)."""
    return MESH_CONF + f'[auth]\nbroker_socket = "{root / "auth.sock"}"\n'


@pytest.fixture
def mesh(tmp_path):
    hosts = Hosts(tmp_path)
    cluster = BridgeCluster(tmp_path, conf_extra=mesh_conf(tmp_path))
    try:
        hosts.create(3)
        cluster.listen_host = hosts.bridge_ip
        cluster.start_controller()
        conf = cluster.root / "spur.conf"
        for host in hosts.hosts:
            hosts.start_spurd(host, conf, [cluster.address], cluster.env)
        cluster.wait_nodes(*(h.name for h in hosts.hosts))
        yield cluster, hosts
    finally:
        cluster.stop()
        hosts.cleanup()


def mesh_ip(address: str, node: str) -> str:
    """The mesh IP the controller at ``address`` holds for ``node`` ("" when none)."""
    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.proto import mesh_pb2
    from spur.rpc.stub import Stub

    async def run() -> str:
        async with open_channel(address) as ch:
            stub = Stub(ch, mesh_pb2.DESCRIPTOR.services_by_name["Mesh"])
            return (await stub.Members(mesh_pb2.MembersRequest(node=node), timeout=10)).address

    return trio.run(run)


def set_pod_cidr(address: str, node: str, pod_cidr: str) -> None:
    import trio

    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import mesh_pb2
    from spur.rpc.stub import Stub

    async def run() -> None:
        async with open_channel(address, metadata_provider=identity_metadata) as ch:
            stub = Stub(ch, mesh_pb2.DESCRIPTOR.services_by_name["Mesh"])
            await stub.SetPodCidr(mesh_pb2.SetPodCidrRequest(node=node, pod_cidr=pod_cidr), timeout=10)

    trio.run(run)


def join_with(address: str, node: str, public_key: str, endpoint: str) -> str:
    """What the controller answers a Mesh/Join with these values (the status code's name, or OK)."""
    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.proto import mesh_pb2
    from spur.rpc.status import RpcError
    from spur.rpc.stub import Stub

    async def run() -> str:
        async with open_channel(address) as ch:
            stub = Stub(ch, mesh_pb2.DESCRIPTOR.services_by_name["Mesh"])
            request = mesh_pb2.JoinRequest(node=node, public_key=public_key, endpoint=endpoint)
            try:
                await stub.Join(request, timeout=10)
            except RpcError as exc:
                return exc.code.name
            return "OK"

    return trio.run(run)


def all_ping(hosts: list[Host], ips: dict[str, str]) -> bool:
    return all(a.ping(ips[b.name]) for a in hosts for b in hosts if a is not b)


def public_key(host: Host) -> str:
    return host.run("spur", "net", "status", "--agent", host.agent).stdout.split("public key: ")[1].split()[0]


def join_all(hosts: list[Host]) -> None:
    for host in hosts:
        out = host.run("spur", "net", "join", "--agent", host.agent).stdout
        assert "joined the mesh: spur0 10.44.0." in out and "(wireguard-go)" in out


def peer_keys(host: Host) -> str:
    return host.run("spur", "net", "status", "--agent", host.agent).stdout


def peer_nodes(host: Host) -> set[str]:
    out = host.run("spur", "net", "status", "--agent", host.agent).stdout
    table = (
        out.split("PUBLIC_KEY\n", 1)[1].split("in agreement")[0].split("disagreements")[0]
        if "PUBLIC_KEY" in out
        else ""
    )
    return {line.split()[0] for line in table.splitlines() if line.strip()}


def test_three_hosts_join_ping_and_heal(mesh):
    cluster, hosts = mesh
    h1, h2, h3 = hosts.hosts
    join_all(hosts.hosts)
    ips = {h.name: mesh_ip(cluster.address, h.name) for h in hosts.hosts}
    assert sorted(ips.values()) == ["10.44.0.1", "10.44.0.2", "10.44.0.3"]
    # A second join changes nothing (idempotent): same address.
    h1.run("spur", "net", "join", "--agent", h1.agent)
    assert mesh_ip(cluster.address, "h1") == ips["h1"]
    # The first hosts joined before the others existed: the reconcile push completes their peers.
    wait_for(lambda: all_ping(hosts.hosts, ips), timeout=30, what="every host to ping every other over spur0")
    status = h1.run("spur", "net", "status", "--agent", h1.agent).stdout
    assert "backend:    wireguard-go" in status and "interface:  spur0 (up)" in status
    assert "in agreement with the controller" in status
    assert peer_nodes(h1) == {"h2", "h3"}

    # A malformed key or endpoint from an agent is refused and logged; the mesh is unaffected.
    assert join_with(cluster.address, "h1", "bm90LWEta2V5", "10.0.0.1:51820") == "INVALID_ARGUMENT"
    assert join_with(cluster.address, "h1", public_key(h1), "not-an-address") == "INVALID_ARGUMENT"
    assert "mesh join of node h1" in cluster.controller.log()
    assert mesh_ip(cluster.address, "h1") == ips["h1"] and all_ping(hosts.hosts, ips)

    # A pod CIDR attached to h2 (what the managed k0s cluster does for Calico) is routed to it over
    # the mesh: AllowedIPs on every peer and a route through spur0.
    h2.run("ip", "addr", "add", "10.42.2.1/32", "dev", "lo")
    set_pod_cidr(cluster.address, "h2", "10.42.2.0/24")
    wait_for(lambda: h1.ping("10.42.2.1") and h3.ping("10.42.2.1"), timeout=20, what="pod CIDR over the mesh")
    assert "10.42.2.0/24 dev spur0 proto 111" in h1.run("ip", "route").stdout
    assert "10.44.0.2/32,10.42.2.0/24" in peer_keys(h3)

    # wireguard-go killed on h2: the interface is gone; the next reconcile rebuilds it.
    for pid in h2.wireguard_go_pids():
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not h2.wireguard_go_pids(), timeout=10, what="wireguard-go on h2 to die")
    wait_for(
        lambda: h2.wireguard_go_pids() and all_ping(hosts.hosts, ips), timeout=30, what="the mesh to heal"
    )
    assert "interface rebuilt" in cluster.controller.log()

    # A reboot of h1: spurd stops, the interface is gone; spurd starts again and the mesh is back.
    h1.proc.kill(signal.SIGTERM)
    h1.run("ip", "link", "del", "spur0")
    hosts.start_spurd(h1, cluster.root / "spur.conf", [cluster.address], cluster.env)
    wait_for(lambda: all_ping(hosts.hosts, ips), timeout=30, what="the mesh after h1's reboot")
    wait_for(lambda: "mesh interface spur0 restored after restart" in h1.proc.log(), timeout=10)

    # Re-join with a new key (leave, join): the new key reaches every peer list.
    old_key = public_key(h3)
    # The private keys never left their nodes: not in the controller's log, WAL or snapshots.
    private = [
        (hosts.root / f"agent-{h.name}" / "mesh" / "private.key").read_text().strip() for h in hosts.hosts
    ]
    controller_files = [
        cluster.controller.log_path,
        *(p for p in (cluster.root / "ctl").rglob("*") if p.is_file()),
    ]
    for path in controller_files:
        data = path.read_bytes()
        assert not any(k.encode() in data for k in private), path
    key_file = hosts.root / "agent-h3" / "mesh" / "private.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert old_key not in key_file.read_text()  # the private key, not the public one
    assert "left the mesh" in h3.run("spur", "net", "leave", "--agent", h3.agent).stdout
    assert mesh_ip(cluster.address, "h3") == "" and not key_file.exists()
    assert h3.run("ip", "link", "show", "spur0", check=False).returncode != 0
    h3.run("spur", "net", "join", "--agent", h3.agent)
    new_key = public_key(h3)
    assert new_key != old_key
    ips["h3"] = mesh_ip(cluster.address, "h3")

    def h3_key_everywhere() -> bool:
        for h in (h1, h2):
            out = peer_keys(h)
            if new_key not in out or old_key in out:
                return False
        return True

    wait_for(h3_key_everywhere, timeout=20, what="h3's new key on h1 and h2")
    wait_for(lambda: all_ping(hosts.hosts, ips), timeout=30, what="pings after the re-join")

    # h3 decommissioned: its spurd stopped, the node removed from the inventory. It leaves every
    # peer list within one reconcile interval and its address is released.
    h3.proc.kill(signal.SIGTERM)
    h1.run("scontrol", "delete", "NodeName=h3")  # an administrator (root) on h1
    wait_for(
        lambda: peer_nodes(h1) == {"h2"} and peer_nodes(h2) == {"h1"}, timeout=10, what="h3 pruned everywhere"
    )
    assert mesh_ip(cluster.address, "h3") == ""
    assert h1.ping(ips["h2"]) and h2.ping(ips["h1"])


@pytest.fixture
def ha_mesh(tmp_path):
    from integration.ha_harness import HACluster

    hosts = Hosts(tmp_path)
    ha = HACluster(tmp_path, size=3, conf_extra=mesh_conf(tmp_path))
    try:
        hosts.create(3)
        for m in ha.members:  # the controllers listen on the bridge, where the namespaces reach them
            m.host = hosts.bridge_ip
        ha.start()
        for host in hosts.hosts:
            hosts.start_spurd(host, ha.members[0].conf, ha.addresses, ha.env)
        ha.wait_nodes(*(h.name for h in hosts.hosts))
        yield ha, hosts
    finally:
        ha.stop()
        hosts.cleanup()


def test_leader_failover_still_converges(ha_mesh):
    ha, hosts = ha_mesh
    h1, h2, h3 = hosts.hosts
    join_all(hosts.hosts)
    leader = ha.wait_leader()
    ips = {h.name: mesh_ip(ha.member(leader).address, h.name) for h in hosts.hosts}
    wait_for(lambda: all_ping(hosts.hosts, ips), timeout=30, what="the mesh before the failover")

    ha.kill(leader)
    rest = [m.node_id for m in ha.members if m.node_id != leader]
    new_leader = ha.wait_leader(among=rest)
    # The replicated state kept every address.
    assert {h.name: mesh_ip(ha.member(new_leader).address, h.name) for h in hosts.hosts} == ips

    # Failures after the failover are healed by the new leader's reconcile.
    for pid in h1.wireguard_go_pids():
        os.kill(pid, signal.SIGKILL)
    old_key = public_key(h2)
    h2.run("spur", "net", "leave", "--agent", h2.agent)
    h2.run("spur", "net", "join", "--agent", h2.agent)
    new_key = public_key(h2)
    assert new_key != old_key
    ips["h2"] = mesh_ip(ha.member(new_leader).address, "h2")
    wait_for(
        lambda: new_key in peer_keys(h1) and new_key in peer_keys(h3) and old_key not in peer_keys(h3),
        timeout=20,
        what="h2's new key everywhere",
    )
    wait_for(lambda: all_ping(hosts.hosts, ips), timeout=30, what="the mesh to converge after the failover")
