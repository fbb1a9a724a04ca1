"""Account quotas as Kubernetes objects (pure), for ``--enable-quota``.

Per Spur account (its account-level association, the one without a user): a Namespace
``spur-acct-<account>`` (:func:`spur.k8s.operator.spurjobs.account_namespace`), a ResourceQuota
``spur-quota`` from the account's GrpTRES -- ``cpu`` -> ``requests.cpu``/``limits.cpu``, ``mem`` (MiB)
-> ``requests.memory``/``limits.memory``, ``gres/gpu`` -> ``requests.<gpu resource>`` for each GPU
resource of the cluster -- and a LimitRange ``spur-defaults`` giving containers that name no
resources a default of 1 CPU and 1 GiB. An account without GrpTRES gets a *closed* quota (``pods:
0``), never an uncapped one. Every object carries ``spur.amd.com/account`` and the managed-by label,
which is how the reconciler finds the objects of deleted accounts (:func:`stale_namespaces`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spur.accounting.tres import TresError, parse_tres
from spur.k8s.operator.pods import MANAGED_BY, MANAGED_BY_LABEL
from spur.k8s.operator.quantity import same_quantities
from spur.k8s.operator.spurjobs import account_namespace

__all__ = [
    "ACCOUNT_LABEL",
    "LIMITRANGE_NAME",
    "QUOTA_NAME",
    "account_limits",
    "desired_objects",
    "quota_hard",
    "spec_matches",
    "stale_namespaces",
]

ACCOUNT_LABEL = "spur.amd.com/account"
QUOTA_NAME = "spur-quota"
LIMITRANGE_NAME = "spur-defaults"
CLOSED = {"pods": "0"}


def account_limits(records: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """account -> its GrpTRES text, from the Accounting service's association records. The ``root``
    account (the top of the association tree: the whole cluster) gets no namespace."""
    out: dict[str, str] = {}
    for rec in records:
        if rec.get("user") or rec.get("partition") or rec.get("account") in (None, "", "root"):
            continue
        out[rec["account"]] = rec.get("grptres", "")
    return out


def quota_hard(grptres: str, gpu_resources: Iterable[str]) -> dict[str, str]:
    """``spec.hard`` of the account's ResourceQuota (module docstring); closed for no usable GrpTRES."""
    try:
        tres = parse_tres(grptres) if grptres else {}
    except TresError:
        tres = {}
    hard: dict[str, str] = {}
    if tres.get("cpu", -1) >= 0 and "cpu" in tres:
        hard["requests.cpu"] = hard["limits.cpu"] = str(tres["cpu"])
    if "mem" in tres and tres["mem"] >= 0:
        hard["requests.memory"] = hard["limits.memory"] = f"{tres['mem']}Mi"
    if "gres/gpu" in tres and tres["gres/gpu"] >= 0:
        for resource in sorted(set(gpu_resources)):
            hard[f"requests.{resource}"] = str(tres["gres/gpu"])
    return hard or dict(CLOSED)


def _meta(name: str, account: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {ACCOUNT_LABEL: account, MANAGED_BY_LABEL: MANAGED_BY}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def desired_objects(account: str, grptres: str, gpu_resources: Iterable[str]) -> list[dict[str, Any]]:
    """Namespace, ResourceQuota and LimitRange of one account, in creation order."""
    ns = account_namespace(account)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, account)},
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta(QUOTA_NAME, account, ns),
            "spec": {"hard": quota_hard(grptres, gpu_resources)},
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": _meta(LIMITRANGE_NAME, account, ns),
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "1", "memory": "1Gi"},
                        "defaultRequest": {"cpu": "1", "memory": "1Gi"},
                    }
                ]
            },
        },
    ]


def spec_matches(kind: str, current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether the stored ``spec`` of a ResourceQuota or LimitRange already says what ``desired``
    says. Quantities are compared by value: the server stores them canonicalised (``32768Mi`` reads
    back as ``32Gi``)."""
    current = current or {}
    if kind == "ResourceQuota":
        return same_quantities(current.get("hard"), desired.get("hard"))
    if kind == "LimitRange":
        have, want = current.get("limits") or [], desired.get("limits") or []
        if len(have) != len(want):
            return False
        for got, wanted in zip(have, want, strict=True):
            if got.get("type") != wanted.get("type"):
                return False
            for key in set(got) | set(wanted):
                if key != "type" and not same_quantities(got.get(key), wanted.get(key)):
                    return False
        return True
    return current == desired


def stale_namespaces(
    namespaces: Iterable[Mapping[str, Any]], accounts: Iterable[str]
) -> list[tuple[str, str]]:
    """(namespace, account) of managed account namespaces whose account no longer exists."""
    live = set(accounts)
    out = []
    for ns in namespaces:
        labels = (ns.get("metadata") or {}).get("labels") or {}
        account = labels.get(ACCOUNT_LABEL)
        if labels.get(MANAGED_BY_LABEL) == MANAGED_BY and account and account not in live:
            out.append((ns["metadata"]["name"], account))
    return out
