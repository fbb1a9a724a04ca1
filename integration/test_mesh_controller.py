"""The controller's side of the mesh on loopback (no tunnels): a wg_cidr too small for the nodes, and
a controller with the mesh disabled. Real spurctld and spurd processes; the agents' Mesh/Join calls
are made as spurd makes them."""

from __future__ import annotations

import base64

import pytest
import trio

from integration.harness import Cluster
from spur.rpc.channel import open_channel
from spur.rpc.proto import mesh_pb2
from spur.rpc.status import RpcError
from spur.rpc.stub import Stub

pytestmark = pytest.mark.integration

MESH = mesh_pb2.DESCRIPTOR.services_by_name["Mesh"]


def mesh_call(c: Cluster, method: str, request) -> object:  # noqa: ANN001
    async def run() -> object:
        async with open_channel(c.address) as ch:
            try:
                return await getattr(Stub(ch, MESH), method)(request, timeout=10)
            except RpcError as exc:
                return exc

    return trio.run(run)


def key(i: int) -> str:
    return base64.b64encode(bytes([i]) * 32).decode()


def test_a_range_too_small_fails_at_the_node_that_does_not_fit(tmp_path) -> None:
    c = Cluster(tmp_path, conf_extra='[network]\nwg_enabled = true\nwg_cidr = "10.44.0.0/30"\n')
    c.start_controller()
    try:
        for name in ("n1", "n2", "n3"):
            c.start_agent(name)
        c.wait_nodes("n1", "n2", "n3")
        for i, name in enumerate(("n1", "n2"), 1):
            answer = mesh_call(
                c, "Join", mesh_pb2.JoinRequest(node=name, public_key=key(i), endpoint=f"192.0.2.{i}:51820")
            )
            assert answer.address == f"10.44.0.{i}"  # type: ignore[union-attr]
        refused = mesh_call(
            c, "Join", mesh_pb2.JoinRequest(node="n3", public_key=key(3), endpoint="192.0.2.3:51820")
        )
        assert isinstance(refused, RpcError) and refused.code.name == "RESOURCE_EXHAUSTED"
        assert refused.message == (
            "no free mesh address for node n3: [network] wg_cidr 10.44.0.0/30 has 2 usable address(es) and all "
            "are held by other nodes; widen wg_cidr (or run spur net leave on a node that no longer needs one)"
        )
        members = mesh_call(c, "Members", mesh_pb2.MembersRequest(node="n3"))
        assert [m.node for m in members.members] == ["n1", "n2"] and members.address == ""  # type: ignore[union-attr]
        assert "mesh join of node n3" in c.controller.log() and c.controller.alive()
    finally:
        c.stop()


def test_join_with_the_mesh_disabled_says_how_to_enable_it(cluster: Cluster) -> None:
    cluster.start_agent("n1")
    cluster.wait_nodes("n1")
    agent = f"127.0.0.1:{cluster.agent_ports['n1']}"
    proc = cluster.cli("spur", "net", "join", "--agent", agent, check=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        "spur net: error: the WireGuard mesh is disabled on the controller: set [network] wg_enabled = true\n"
    )
    assert not (cluster.root / "agent-n1" / "mesh").exists()  # nothing was stored
    status = cluster.cli("spur", "net", "status", "--agent", agent).stdout
    assert "joined:     no" in status and "peers:      0" in status
