"""``--enable-quota``: every ``interval`` seconds, project each Spur account's GrpTRES into its
namespace's ResourceQuota and LimitRange (:mod:`spur.k8s.operator.quota`).

Accounts are read with ``Accounting.Show`` (entity ``association``; the account-level records).
Missing objects are created, a quota whose ``spec.hard`` differs in value (the server stores
quantities canonicalised: ``32768Mi`` reads back as ``32Gi``) is replaced, and the quota objects
of accounts that no longer exist are deleted (their namespace stays, unlabelled, with whatever runs
in it). A failed pass is logged and the next one starts over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio

from spur.k8s.operator.kube import KubeClient, KubeError, path_of
from spur.k8s.operator.link import ControllerLink
from spur.k8s.operator.pods import MANAGED_BY, MANAGED_BY_LABEL
from spur.k8s.operator.quota import (
    ACCOUNT_LABEL,
    LIMITRANGE_NAME,
    QUOTA_NAME,
    account_limits,
    desired_objects,
    spec_matches,
    stale_namespaces,
)
from spur.rpc.proto import accounting_pb2 as apb
from spur.rpc.status import RpcError

__all__ = ["QuotaReconciler"]

log = logging.getLogger("spur.k8s.operator.quota")

ACCOUNTING = apb.DESCRIPTOR.services_by_name["Accounting"]
_PLURAL = {"Namespace": "namespaces", "ResourceQuota": "resourcequotas", "LimitRange": "limitranges"}


class QuotaReconciler:
    def __init__(
        self,
        kube: KubeClient,
        link: ControllerLink,
        *,
        gpu_resources: Mapping[str, str],
        interval: float = 30.0,
    ) -> None:
        self.kube = kube
        self.link = link
        self.gpu_resources = gpu_resources
        self.interval = interval
        self.passes = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                await self.reconcile()
                self.passes += 1
            except (RpcError, KubeError) as exc:
                log.warning("quota reconcile failed (%s); next pass in %gs", exc, self.interval)
            await trio.sleep(self.interval)

    async def reconcile(self) -> None:
        records = await self.link.call(ACCOUNTING, "Show", apb.AcctShowRequest(entity="association"))
        accounts = account_limits(dict(r.fields) for r in records.records)
        gpus = set(self.gpu_resources.values()) or {"amd.com/gpu"}
        for account, grptres in sorted(accounts.items()):
            for obj in desired_objects(account, grptres, gpus):
                await self._ensure(obj)
        listed = await self.kube.list(
            path_of(plural="namespaces"), labelSelector=f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        )
        for namespace, account in stale_namespaces(listed.get("items") or [], accounts):
            for plural, name in (("resourcequotas", QUOTA_NAME), ("limitranges", LIMITRANGE_NAME)):
                await self.kube.delete(path_of(plural=plural, namespace=namespace, name=name))
            await self.kube.merge_patch(
                path_of(plural="namespaces", name=namespace), {"metadata": {"labels": {ACCOUNT_LABEL: None}}}
            )
            log.info("account %s is gone: quota objects in namespace %s deleted", account, namespace)

    async def _ensure(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        plural = _PLURAL[obj["kind"]]
        path = path_of(plural=plural, namespace=meta.get("namespace"), name=meta["name"])
        current = await self.kube.get(path)
        if current is None:
            await self.kube.create(path_of(plural=plural, namespace=meta.get("namespace")), obj)
            log.info(
                "created %s %s",
                obj["kind"],
                meta["name"] if "namespace" not in meta else f"{meta['namespace']}/{meta['name']}",
            )
            return
        labels = (current.get("metadata") or {}).get("labels") or {}
        wanted_labels = meta["labels"]
        if obj["kind"] == "Namespace":
            if any(labels.get(k) != v for k, v in wanted_labels.items()):
                await self.kube.merge_patch(path, {"metadata": {"labels": wanted_labels}})
            return
        if not spec_matches(obj["kind"], current.get("spec"), obj["spec"]) or any(
            labels.get(k) != v for k, v in wanted_labels.items()
        ):
            replacement = dict(obj)
            replacement["metadata"] = {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}
            await self.kube.replace(path, replacement)
            log.info("updated %s %s/%s: %s", obj["kind"], meta["namespace"], meta["name"], obj["spec"])
