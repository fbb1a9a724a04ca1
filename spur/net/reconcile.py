"""The leader's mesh reconcile decision, free of I/O (the task in spur.controller.mesh performs it).

Every interval the leader pushes one member set to every meshed agent. The set is the same for all
of them (each agent finds itself in it by node name), so it is built once per pass. The decision:

- ``release``: nodes that hold a mesh address but left the inventory (LeaveMesh each);
- ``push_to``: every member (an agent whose interface vanished rebuilds it on the push, so pushes
  are not skipped when nothing changed);
- ``changes``: members added, removed or changed since the previous pass (for the log).

A push is a delta (:func:`build_member_delta`, ``MeshAgent/ApplyDelta``) to an agent that holds the
previous pass's set, and the whole set to any other (new, restarted, a failed push, a new leader).
The agent merges a delta into the set it holds (:func:`merge_member_delta`) and asks for the whole set
when its set is not the delta's base.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spur.net.model import Member
from spur.rpc.proto import mesh_pb2

__all__ = [
    "ReconcilePlan",
    "build_member_delta",
    "build_member_set",
    "member_from_proto",
    "merge_member_delta",
    "plan_reconcile",
]


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


def _member_to_proto(m: Member) -> mesh_pb2.Member:
    return mesh_pb2.Member(
        node=m.node, public_key=m.public_key, endpoint=m.endpoint, address=m.address, pod_cidr=m.pod_cidr
    )


def build_member_delta(
    plan: ReconcilePlan, *, base_version: int, version: int, cidr: str, listen_port: int
) -> mesh_pb2.MemberDelta:
    """The change from the previous pass's set (``base_version``) to this pass's (``plan.members``):
    the added and changed members in node order, and the removed nodes."""
    return mesh_pb2.MemberDelta(
        base_version=base_version,
        version=version,
        cidr=cidr,
        listen_port=listen_port,
        upsert=[_member_to_proto(plan.members[n]) for n in sorted([*plan.added, *plan.changed])],
        removed=plan.removed,
    )


def merge_member_delta(
    held: mesh_pb2.MemberSet | None, delta: mesh_pb2.MemberDelta
) -> mesh_pb2.MemberSet | None:
    """The whole set ``delta`` makes of ``held``, or None when ``held`` is not its base (no set held,
    another version, another cidr or port): the sender must push the whole set instead."""
    if (
        held is None
        or held.version != delta.base_version
        or held.cidr != delta.cidr
        or held.listen_port != delta.listen_port
    ):
        return None
    members = {m.node: m for m in held.members}
    for node in delta.removed:
        members.pop(node, None)
    for m in delta.upsert:
        members[m.node] = m
    merged = mesh_pb2.MemberSet()
    merged.CopyFrom(held)
    merged.version = delta.version
    del merged.members[:]
    merged.members.extend(members[n] for n in sorted(members))
    return merged


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
        members=[_member_to_proto(m) for m in members],
    )


def member_from_proto(m: mesh_pb2.Member) -> Member:
    return Member(m.node, m.public_key, m.endpoint, m.address, m.pod_cidr)
