"""The leader's mesh reconcile task in-process, against a real Raft log and a real gRPC server that
records the pushes it receives (standing in for spurd's MeshAgent service), on Trio's MockClock: a
30 s interval is exercised without waiting."""

from __future__ import annotations

import base64

import pytest
import trio
from trio.testing import MockClock

from spur.config import parse_config_text
from spur.controller.app import Controller
from spur.controller.mesh import AGENT_SERVICE, MeshReconcile
from spur.core.job import Node
from spur.net.reconcile import merge_member_delta
from spur.rpc.proto import mesh_pb2
from spur.rpc.server import Server
from spur.state import commands as c
from spur.state.mesh import JoinMesh


@pytest.fixture
def mock_clock() -> MockClock:
    return MockClock(autojump_threshold=0.05)


class RecordingAgent:
    """MeshAgent that holds the set it was pushed, as spurd does (merging deltas with the same
    function), and records each push: (trio time, kind "whole"/"delta"/"refused", bytes, members)."""

    def __init__(self) -> None:
        self.held: mesh_pb2.MemberSet | None = None
        self.pushes: list[tuple[float, str, int, list[str]]] = []

    def _record(self, kind: str, size: int) -> None:
        members = [m.node for m in self.held.members] if self.held is not None else []
        self.pushes.append((trio.current_time(), kind, size, members))

    async def Apply(self, request: mesh_pb2.MemberSet, context) -> mesh_pb2.ApplyResult:  # noqa: ANN001
        self.held = request
        self._record("whole", request.ByteSize())
        return mesh_pb2.ApplyResult()

    async def ApplyDelta(self, request: mesh_pb2.MemberDelta, context) -> mesh_pb2.ApplyResult:  # noqa: ANN001
        merged = merge_member_delta(self.held, request)
        if merged is None:
            self._record("refused", request.ByteSize())
            return mesh_pb2.ApplyResult(need_whole_set=True)
        self.held = merged
        self._record("delta", request.ByteSize())
        return mesh_pb2.ApplyResult()


class OlderAgent:
    """A spurd from before deltas: it serves Apply only."""

    def __init__(self) -> None:
        self.pushes: list[list[str]] = []

    async def Apply(self, request: mesh_pb2.MemberSet, context) -> mesh_pb2.ApplyResult:  # noqa: ANN001
        self.pushes.append([m.node for m in request.members])
        return mesh_pb2.ApplyResult()


def key(i: int) -> str:
    return base64.b64encode(bytes([i]) * 32).decode()


async def test_pushes_every_interval_and_prunes_a_removed_node_within_one(tmp_path, mock_clock):
    conf = '[network]\nwg_enabled = true\nwg_cidr = "10.44.0.0/24"\nwg_reconcile_interval_secs = 30\n'
    cfg = parse_config_text(conf, overrides={"controller.state_dir": str(tmp_path / "state")})
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    agents = {name: RecordingAgent() for name in ("a", "b", "c")}
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        for i, (name, agent) in enumerate(agents.items(), 1):
            server = Server()
            server.add_service(AGENT_SERVICE, agent)
            port = await nursery.start(server.serve, "127.0.0.1", 0)
            await ctl.propose(c.RegisterNode(Node(name=name, address="127.0.0.1", port=port, cpus=1), 0.0))
            await ctl.propose(JoinMesh(name, cfg.network.wg_cidr, key(i), f"192.0.2.{i}:51820", 0.0))
        task = MeshReconcile(ctl)
        await nursery.start(task.run)
        await trio.sleep(95)  # passes at 0, 30, 60, 90
        assert [len(a.pushes) for a in agents.values()] == [4, 4, 4]
        assert agents["a"].pushes[-1][3] == ["a", "b", "c"]

        removed_at = trio.current_time()
        await ctl.propose(c.RemoveNode(["c"], 1.0))
        ctl.mesh_changed.set()  # what the Inventory service does
        await trio.sleep(1)
        # The next pass ran at once: c is gone from every list and its address released.
        for name in ("a", "b"):
            when, _, _, members = agents[name].pushes[-1]
            assert members == ["a", "b"] and when - removed_at < 30
        assert ctl.state.domains["mesh"].address_of("c") is None  # type: ignore[attr-defined]
        assert len(agents["c"].pushes) == 4
        assert task.passes >= 5
        nursery.cancel_scope.cancel()


async def test_a_pass_pushes_what_changed_and_the_whole_set_only_to_who_lacks_its_base(tmp_path, mock_clock):
    """The first pass pushes whole sets; an unchanged pass costs under 100 bytes per node; a change is a
    delta naming only it; an agent that lost its set (a restarted spurd) answers need_whole_set and
    gets the whole set in the same pass; an older spurd without ApplyDelta keeps getting whole sets."""
    conf = '[network]\nwg_enabled = true\nwg_cidr = "10.44.0.0/16"\nwg_reconcile_interval_secs = 30\n'
    cfg = parse_config_text(conf, overrides={"controller.state_dir": str(tmp_path / "state")})
    ctl = Controller(cfg, listen=("127.0.0.1", 0))
    agents = {f"n{i:03d}": RecordingAgent() for i in range(1, 41)}
    older = OlderAgent()
    async with trio.open_nursery() as nursery:
        await nursery.start(ctl.raft.run)
        everyone: dict[str, object] = {**agents, "old": older}
        for i, (name, agent) in enumerate(everyone.items(), 1):
            server = Server()
            server.add_service(AGENT_SERVICE, agent)
            port = await nursery.start(server.serve, "127.0.0.1", 0)
            await ctl.propose(c.RegisterNode(Node(name=name, address="127.0.0.1", port=port, cpus=1), 0.0))
            await ctl.propose(JoinMesh(name, cfg.network.wg_cidr, key(i), f"192.0.2.{i}:51820", 0.0))
        task = MeshReconcile(ctl)
        await nursery.start(task.run)
        await trio.sleep(1)
        whole = agents["n001"].pushes[-1][2]
        assert [a.pushes[-1][1] for a in agents.values()] == ["whole"] * 40
        assert whole > 40 * 80  # every member: key, endpoint, address

        await trio.sleep(30)  # an unchanged pass
        for a in agents.values():
            _, kind, size, members = a.pushes[-1]
            assert kind == "delta" and size < 100 and len(members) == 41
        assert len(older.pushes) == 2 and len(older.pushes[-1]) == 41

        await ctl.propose(c.RemoveNode(["n040"], 1.0))
        ctl.mesh_changed.set()
        agents["n002"].held = None  # n002's spurd restarted: it holds no set
        await trio.sleep(1)
        _, kind, size, members = agents["n001"].pushes[-1]
        assert kind == "delta" and size < 100 and "n040" not in members and len(members) == 40
        assert [p[1] for p in agents["n002"].pushes[-2:]] == ["refused", "whole"]
        assert agents["n002"].pushes[-1][3] == agents["n001"].pushes[-1][3]
        assert older.pushes[-1] == agents["n001"].pushes[-1][3]
        nursery.cancel_scope.cancel()
