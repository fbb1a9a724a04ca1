"""The leader's mesh reconcile decision, free of I/O (the task in spur.controller.mesh performs it).

Every interval the leader pushes one member set to every meshed agent. The set is the same for all
of them (each agent finds itself in it by node name), so it is built once per pass. The decision:

- ``release``: nodes that hold a mesh address but left the inventory (LeaveMesh each);
- ``push_to``: every member (an agent whose interface vanished rebuilds it on the push, so pushes
  are not skipped when nothing changed);
- ``changes``: members added, removed or changed since the previous pass (for the log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spur.net.model import Member
from spur.rpc.proto import mesh_pb2

__all__ = ["ReconcilePlan", "build_member_set", "member_from_proto", "plan_reconcile"]


@dataclass
class ReconcilePlan:
    release: list[str] = field(default_factory=list)
    push_to: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)


def plan_reconcile(
    members: Sequence[Member], previous: Mapping[str, Member], departed: Sequence[str]
) -> ReconcilePlan:
    """Compare this pass's members with the previous pass's (both keyed by node)."""
    now = {m.node: m for m in members}
    plan = ReconcilePlan(release=sorted(departed), push_to=sorted(now), members=now)
    for node, m in now.items():
        old = previous.get(node)
        if old is None:
            plan.added.append(node)
        elif old != m:
            plan.changed.append(node)
    plan.removed = sorted(n for n in previous if n not in now)
    plan.added.sort()
    plan.changed.sort()
    return plan


def build_member_set(
    members: Sequence[Member], *, cidr: str, listen_port: int, version: int, node: str = "", address: str = ""
) -> mesh_pb2.MemberSet:
    """The message pushed to agents (``node``/``address`` empty: the same message for every agent)."""
    return mesh_pb2.MemberSet(
        node=node,
        address=address,
        cidr=cidr,
        listen_port=listen_port,
        version=version,
        members=[
            mesh_pb2.Member(
                node=m.node,
                public_key=m.public_key,
                endpoint=m.endpoint,
                address=m.address,
                pod_cidr=m.pod_cidr,
            )
            for m in members
        ],
    )


def member_from_proto(m: mesh_pb2.Member) -> Member:
    return Member(m.node, m.public_key, m.endpoint, m.address, m.pod_cidr)
