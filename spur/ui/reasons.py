"""Slurm's pending-job reason codes in plain words (pure)."""

from __future__ import annotations

import re

__all__ = ["explain_reason"]

_EXACT = {
    "None": "Waiting for the scheduler's next pass.",
    "Priority": "Other jobs with a higher priority are ahead of it in the queue.",
    "Resources": "Waiting for resources: no node has enough free CPUs, memory or GPUs yet.",
    "Dependency": "Waiting for the jobs it depends on (--dependency).",
    "DependencyNeverSatisfied": "Its dependency can never be satisfied; it will not start. Cancel it.",
    "BeginTime": "Its start time (--begin) has not come yet.",
    "JobHeldUser": "Held by its owner (scontrol hold); release it to let it run.",
    "JobHeldAdmin": "Held by an administrator; only an administrator can release it.",
    "PartitionDown": "Its partition is down.",
    "PartitionInactive": "Its partition is inactive.",
    "PartitionNodeLimit": "It asks for more nodes than its partition allows.",
    "PartitionTimeLimit": "Its time limit is longer than its partition allows.",
    "PartitionConfig": "It asks for something its partition does not have.",
    "ReqNodeNotAvail": "A node it needs is down, drained or reserved.",
    "NodeDown": "A node it needs is down.",
    "BadConstraints": "No node can ever satisfy what it asks for.",
    "Reservation": "Waiting for its reservation to start.",
    "launch failed requeued held": "Its launch failed; it was requeued and held.",
    "JobArrayTaskLimit": "Its array already runs as many tasks as its %limit allows.",
    "InvalidAccount": "Its account is not valid for its user.",
    "InvalidQOS": "Its QOS is not valid for its association.",
    "QOSNotAllowed": "Its QOS is not allowed for its association or partition.",
    "AssocNotAllowed": "Its association is not allowed in this partition.",
}

_LIMITS = {
    "Cpu": "CPUs", "Mem": "memory", "Node": "nodes", "Jobs": "running jobs", "Job": "jobs", "Billing": "billing",
    "GRES": "GPUs/GRES", "Wall": "wall time", "SubmitJob": "submitted jobs", "CpuMin": "CPU-minutes",
    "Memory": "memory", "WallDuration": "wall time",
}  # fmt: skip

_LIMIT_RE = re.compile(r"^(QOS|Assoc)(Grp|Max)([A-Za-z]+?)(PerUser|PerJob|PerAccount|PerNode)?(Limit|RunMinutes|Minutes)?$")


def explain_reason(reason: str) -> str:
    """A sentence for ``reason`` (one of Slurm's codes); an unknown code is returned as it is."""
    reason = reason.strip()
    if not reason:
        return ""
    if reason in _EXACT:
        return _EXACT[reason]
    m = _LIMIT_RE.match(reason)
    if m is None:
        return reason
    owner = "QOS" if m.group(1) == "QOS" else "association"
    what = _LIMITS.get(m.group(3), m.group(3))
    if m.group(5) in ("RunMinutes", "Minutes"):
        what += "-minutes" if not what.endswith("minutes") else ""
    if m.group(2) == "Grp":
        scope = "the whole group's"
    else:
        scope = {"PerUser": "each user's", "PerJob": "each job's", "PerAccount": "each account's",
                 "PerNode": "each node's"}.get(m.group(4) or "", "the")  # fmt: skip
    return f"Held back by its {owner} limit on {scope} {what} ({reason})."
