"""A node's Comment=: what its agent says it cannot do (e.g. enforce job memory limits) reaches
``scontrol show node`` through registration."""

from __future__ import annotations

from spur.cli.scontrol import show_node_text
from spur.rpc import convert
from spur.rpc.proto import spur_pb2 as pb


def test_registration_carries_the_agents_comment() -> None:
    req = pb.RegisterNodeRequest(name="n1", cpus=2, comment="job memory limits not enforced: read-only")
    assert convert.node_from_register(req, "10.0.0.1").comment == "job memory limits not enforced: read-only"
    assert convert.node_from_register(pb.RegisterNodeRequest(name="n2"), "10.0.0.2").comment == ""


def test_show_node_prints_comment_only_when_there_is_one() -> None:
    base = dict(name="n1", cpus=2, state="idle", address="10.0.0.1")
    with_comment = show_node_text(pb.NodeInfo(**base, comment="limits not enforced"), 0.0)
    assert "   Comment=limits not enforced\n" in with_comment
    assert "Comment=" not in show_node_text(pb.NodeInfo(**base), 0.0)
