"""The in-memory cluster state behind the API double: objects, resourceVersions, history, rules.

Pure bookkeeping: no sockets, no Trio. Every write goes through ``_commit``, which assigns the next
resourceVersion, records a ``Change`` in a bounded history (what watches replay) and calls
``notify`` so a server can wake its watchers. The rules of the real API server that Spur and
kubectl rely on live here: optimistic concurrency on ``metadata.resourceVersion``, status
subresources, finalizers and ``deletionTimestamp``, namespace termination, garbage collection of
owned objects, CRD registration, pod eviction against PodDisruptionBudgets, and a minimal workload
controller (StatefulSet/Deployment/DaemonSet -> pods) so manifests produce pods.
"""

from __future__ import annotations

import base64
import copy
import math
import re
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from integration.kubeapi import errors
from integration.kubeapi.errors import ApiError
from integration.kubeapi.patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch
from integration.kubeapi.quantities import canonicalize
from integration.kubeapi.resources import Registry, ResourceType
from integration.kubeapi.selectors import (
    COMMON_FIELDS,
    KIND_FIELDS,
    SelectorError,
    fields_match,
    matches,
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
)
from integration.kubeapi.validation import admit, admit_status
from integration.kubeapi.watch import Change

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


class Store:
    """All objects of the fake cluster.

    ``clock`` returns wall-clock seconds (timestamps); ``history`` bounds how many changes a watch
    can resume across (older resourceVersions get 410 Expired); ``workloads`` turns the minimal
    workload controller on; ``graceful_pods`` makes deleting a running, node-bound pod mark it
    (``deletionTimestamp`` = now + grace period, ``deletionGracePeriodSeconds``) until its kubelet
    confirms (``Kubelet.confirm_deletion``), as on a real cluster; without it such pods go at
    once, their last state still recording the grace period the request asked for.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        history: int = 10000,
        workloads: bool = True,
        graceful_pods: bool = False,
        notify: Callable[[], None] | None = None,
    ) -> None:
        self.clock = clock
        self.graceful_pods = graceful_pods
        self.registry = Registry()
        self.notify = notify or (lambda: None)
        self.workloads = workloads
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=history)
        self._compacted = 0  # changes with rv <= this are no longer in the history
        self._ips = 0
        self._reconciling = False
        #: what each pod's containers wrote, (namespace, pod) -> text (``pods/log``; not an API object)
        self.pod_logs: dict[tuple[str, str], str] = {}
        ns = self.registry.by_key("", "namespaces")
        assert ns is not None
        for name in _INITIAL_NAMESPACES:
            self.create(ns, None, {"metadata": {"name": name}})

    # ------------------------------------------------------------------ bookkeeping

    @property
    def resource_version(self) -> int:
        return self._rv

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects.setdefault(rt.key, {})

    def _commit(
        self, rt: ResourceType, namespace: str | None, old: dict | None, new: dict | None
    ) -> dict | None:
        self._rv += 1
        if new is not None:
            new["metadata"]["resourceVersion"] = str(self._rv)
        key = (namespace or "", (new or old or {})["metadata"]["name"])
        if new is None:
            self._bucket(rt).pop(key, None)
        else:
            self._bucket(rt)[key] = new
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].rv
        self._history.append(Change(self._rv, rt.key, namespace, copy.deepcopy(old), copy.deepcopy(new)))
        self.notify()
        return copy.deepcopy(new)

    def compact(self) -> None:
        """Forget the whole change history (as etcd compaction does): older watches get 410."""
        self._compacted = self._rv
        self._history.clear()

    def changes_since(self, rv: int) -> list[Change]:
        """Every change after ``rv``; raises 410 Expired if some were already forgotten."""
        if rv < self._compacted:
            raise errors.expired(f"too old resource version: {rv} ({self._compacted + 1})")
        return [c for c in self._history if c.rv > rv]

    def _rt(self, group: str, plural: str) -> ResourceType:
        rt = self.registry.by_key(group, plural)
        assert rt is not None, (group, plural)
        return rt

    # ------------------------------------------------------------------ reads

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._bucket(rt).get((namespace or "" if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return copy.deepcopy(obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Matching objects sorted by namespace/name, and the resourceVersion of the list."""
        labels, fields = self.selectors(rt, label_selector, field_selector)
        items = [
            copy.deepcopy(obj)
            for (ns, _), obj in sorted(self._bucket(rt).items())
            if (not rt.namespaced or namespace is None or ns == namespace)
            and matches(labels, obj["metadata"].get("labels"))
            and fields_match(fields, obj)
        ]
        return items, self._rv

    def selectors(self, rt: ResourceType, label_selector: str | None, field_selector: str | None) -> tuple:
        try:
            labels = parse_label_selector(label_selector)
            fields = parse_field_selector(
                field_selector, COMMON_FIELDS | KIND_FIELDS.get(rt.key, frozenset())
            )
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None
        return labels, fields

    # ------------------------------------------------------------------ create

    def create(
        self, rt: ResourceType, namespace: str | None, body: Any, *, strict: bool = False
    ) -> dict[str, Any]:
        """POST. ``strict``: refuse unknown fields and invalid values (``fieldValidation=Strict``)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        self._check_type(rt, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{secrets.token_hex(3)[:5]}"
        name = meta.get("name")
        if not name:
            raise errors.invalid(
                rt.kind, rt.group, "", "metadata.name", "Required value: name or generateName is required"
            )
        if not _NAME.match(name) or len(name) > 253:
            raise errors.invalid(
                rt.kind,
                rt.group,
                name,
                "metadata.name",
                f"Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            )
        if rt.namespaced:
            ns = self._namespace_for(meta, namespace)
            meta["namespace"] = ns
            self._check_namespace_open(ns)
        else:
            meta.pop("namespace", None)
            ns = None
        if (ns or "", name) in self._bucket(rt):
            raise errors.already_exists(rt.plural, rt.group, name)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock())
        meta["generation"] = 1
        if rt.status_subresource:
            obj.pop("status", None)
        self._defaults(rt, obj)
        canonicalize(rt.key, obj)
        obj = admit(rt, obj, strict)
        created = self._commit(rt, ns, None, obj)
        assert created is not None
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._establish_crd(rt, created)
            created = self.get(rt, None, name)
        self._after_write(rt, created)
        return created

    def _check_type(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        kind = obj.setdefault("kind", rt.kind)
        api_version = obj.setdefault("apiVersion", rt.api_version)
        if kind != rt.kind or api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) and kind ({kind}) do not match the "
                f"endpoint ({rt.api_version}, {rt.kind})"
            )

    def _namespace_for(self, meta: dict[str, Any], namespace: str | None) -> str:
        given = meta.get("namespace")
        if namespace and given and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        ns = namespace or given
        if not ns:
            raise errors.bad_request("a namespace is required for a namespaced kind")
        return ns

    def _check_namespace_open(self, ns: str) -> None:
        nsobj = self._bucket(self._rt("", "namespaces")).get(("", ns))
        if nsobj is None:
            raise errors.not_found("namespaces", "", ns)
        if nsobj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
                kind="namespaces",
                name=ns,
            )

    def _defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if rt.key == ("", "namespaces"):
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        elif rt.key == ("", "pods"):
            obj.setdefault("spec", {})
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif rt.key == ("", "services"):
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if "clusterIP" not in spec:
                self._ips += 1
                spec["clusterIP"] = f"10.96.{self._ips // 250}.{self._ips % 250 + 1}"
            spec["clusterIPs"] = [spec["clusterIP"]]
            obj["status"] = {"loadBalancer": {}}
        elif rt.key == ("", "secrets"):
            if not obj.get("type"):
                obj["type"] = "Opaque"
            string_data = obj.pop("stringData", None) or {}
            data = obj.setdefault("data", {}) if string_data else obj.get("data")
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        elif rt.key == ("", "nodes"):
            obj.setdefault("spec", {})
            obj["status"] = obj.get("status") or {}
        elif rt.status_subresource:
            obj["status"] = {}

    # ------------------------------------------------------------------ update / patch

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
        *,
        strict: bool = False,
    ) -> dict[str, Any]:
        """PUT: replace the object (or only its status, with ``subresource="status"``)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        current = self.get(rt, namespace, name)
        new = copy.deepcopy(body)
        self._check_type(rt, new)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)
        return self._replace(rt, current, new, subresource, strict)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        subresource: str | None = None,
        *,
        strict: bool = False,
    ) -> dict[str, Any]:
        """PATCH with one of the three patch types (``content_type`` without parameters)."""
        current = self.get(rt, namespace, name)
        try:
            if content_type == MERGE_PATCH:
                new = json_merge_patch(current, body)
            elif content_type == JSON_PATCH:
                new = json_patch(current, body)
            elif content_type == STRATEGIC_PATCH:
                if not rt.strategic:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media types include: "
                        f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
                    )
                new = strategic_merge_patch(current, body)
            else:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_PATCH}",
                )
        except PatchError as exc:
            raise ApiError(422, "Invalid", f"the patch could not be applied: {exc}") from None
        if not isinstance(new, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        if new.get("kind") != rt.kind or new.get("apiVersion") != rt.api_version:
            raise errors.bad_request("a patch may not change kind or apiVersion")
        meta = new.get("metadata") or {}
        if meta.get("name") != name:
            raise errors.bad_request("a patch may not change metadata.name")
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)
        return self._replace(rt, current, new, subresource, strict)

    def _replace(
        self,
        rt: ResourceType,
        current: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        strict: bool = False,
    ) -> dict[str, Any]:
        if subresource not in (None, "status"):
            raise errors.ApiError(
                404, "NotFound", f"the server could not find the requested resource ({subresource})"
            )
        if subresource == "status":
            if not rt.status_subresource:
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            result = copy.deepcopy(current)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            meta = result.setdefault("metadata", {})
            cur_meta = current["metadata"]
            for key in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if key in cur_meta:
                    meta[key] = cur_meta[key]
                else:
                    meta.pop(key, None)
            if rt.status_subresource:
                if "status" in current:
                    result["status"] = current["status"]
                else:
                    result.pop("status", None)
            if rt.key == ("", "secrets"):
                self._defaults(rt, result)
            canonicalize(rt.key, result)
            if _without(result, "metadata", "status") != _without(current, "metadata", "status"):
                meta["generation"] = int(cur_meta.get("generation", 1)) + 1
            if rt.key == ("", "namespaces"):
                result["status"] = current.get("status", {})
        result["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if subresource is None:
            result = admit(rt, result, strict)
        else:
            result = admit_status(rt, result)
        if result == current:
            return current  # a no-op write changes nothing, not even the resourceVersion
        meta = result["metadata"]
        ns = meta.get("namespace") if rt.namespaced else None
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not self._namespace_blocked(rt, result)
        ):
            self._hard_delete(rt, current)
            return result
        updated = self._commit(rt, ns, current, result)
        assert updated is not None
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.registry.register_crd(updated)
            self.notify()
        self._after_write(rt, updated)
        return updated

    # ------------------------------------------------------------------ delete

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Delete, honouring finalizers; returns (last state, whether it is gone now)."""
        current = self.get(rt, namespace, name)
        pre = (options or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {current['metadata']['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: {current['metadata']['resourceVersion']}",
            )
        grace = self._grace_period(rt, current, options)
        if grace:  # a running pod: kubelet stops it first (see graceful_pods)
            return self._mark_terminating(rt, current, grace)
        blocked = bool(current["metadata"].get("finalizers")) or rt.key == ("", "namespaces")
        if not blocked:
            asked = (options or {}).get("gracePeriodSeconds") if rt.key == ("", "pods") else None
            self._hard_delete(rt, current, None if asked is None else int(asked))
            return current, True
        if current["metadata"].get("deletionTimestamp"):
            if rt.key == ("", "namespaces"):
                self._drain_namespace(name)
            if self._exists(rt, namespace, name):
                return self.get(rt, namespace, name), False
            return current, True
        marked = copy.deepcopy(current)
        marked["metadata"]["deletionTimestamp"] = rfc3339(self.clock())
        marked["metadata"]["deletionGracePeriodSeconds"] = 0
        if rt.key == ("", "namespaces"):
            marked.setdefault("status", {})["phase"] = "Terminating"
        updated = self._commit(rt, namespace if rt.namespaced else None, current, marked)
        assert updated is not None
        if rt.key == ("", "namespaces"):
            self._drain_namespace(name)
            gone = not self._exists(rt, None, name)
            return (updated if gone else self.get(rt, None, name)), gone
        return updated, False

    def _grace_period(self, rt: ResourceType, pod: dict[str, Any], options: dict[str, Any] | None) -> int:
        """Seconds a graceful deletion of ``pod`` waits for its kubelet; 0 = delete now.

        Only with ``graceful_pods``, and only for a pod bound to a node and not finished: the
        grace period is the request's ``gracePeriodSeconds``, else the pod's
        ``terminationGracePeriodSeconds``, else 30 (an already shorter one is kept)."""
        if not self.graceful_pods or rt.key != ("", "pods"):
            return 0
        if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            return 0
        asked = (options or {}).get("gracePeriodSeconds")
        grace = int(asked) if asked is not None else int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        marked = pod["metadata"].get("deletionGracePeriodSeconds")
        if marked is not None and pod["metadata"].get("deletionTimestamp"):
            grace = min(grace, int(marked))
        return max(grace, 0)

    def _mark_terminating(
        self, rt: ResourceType, pod: dict[str, Any], grace: int
    ) -> tuple[dict[str, Any], bool]:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == grace:
            return pod, False
        marked = copy.deepcopy(pod)
        marked["metadata"]["deletionTimestamp"] = rfc3339(self.clock() + grace)
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        updated = self._commit(rt, meta.get("namespace"), pod, marked)
        assert updated is not None
        return updated, False

    def delete_collection(
        self, rt: ResourceType, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> list[dict[str, Any]]:
        items, _ = self.list(rt, namespace, label_selector, field_selector)
        out = []
        for item in items:
            meta = item["metadata"]
            last, _gone = self.delete(rt, meta.get("namespace"), meta["name"])
            out.append(last)
        return out

    def _exists(self, rt: ResourceType, namespace: str | None, name: str) -> bool:
        return ((namespace or "") if rt.namespaced else "", name) in self._bucket(rt)

    def _namespace_blocked(self, rt: ResourceType, obj: dict[str, Any]) -> bool:
        """A terminating namespace stays until its content is gone."""
        if rt.key != ("", "namespaces"):
            return False
        name = obj["metadata"]["name"]
        return any(
            ns == name for other in self.registry.all() if other.namespaced for (ns, _) in self._bucket(other)
        )

    def _hard_delete(self, rt: ResourceType, current: dict[str, Any], grace: int | None = None) -> None:
        meta = current["metadata"]
        ns = meta.get("namespace") if rt.namespaced else None
        if not self._exists(rt, ns, meta["name"]):
            return
        last = copy.deepcopy(self._bucket(rt)[((ns or ""), meta["name"])])
        last["metadata"].setdefault("deletionTimestamp", rfc3339(self.clock()))
        if grace is not None:
            last["metadata"]["deletionGracePeriodSeconds"] = grace
        self._commit(rt, ns, last, None)
        if rt.key == ("", "pods"):
            self.pod_logs.pop((ns or "", meta["name"]), None)
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            for key in self.registry.crd_keys(meta["name"]):
                served = self.registry.by_key(*key)
                for (obj_ns, _), obj in list(self._objects.get(key, {}).items()):
                    if served is not None:
                        self._commit(served, obj_ns or None, obj, None)
                self._objects.pop(key, None)
            self.registry.unregister_crd(meta["name"])
            self.notify()
        self._collect_garbage(meta["uid"])
        if ns:
            self._maybe_finish_namespace(ns)
        self._after_write(rt, None)

    def _collect_garbage(self, owner_uid: str) -> None:
        alive = {obj["metadata"]["uid"] for bucket in self._objects.values() for obj in bucket.values()}
        for rt in self.registry.all():
            for obj in list(self._bucket(rt).values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if (
                    refs
                    and any(r.get("uid") == owner_uid for r in refs)
                    and not any(r.get("uid") in alive for r in refs)
                ):
                    if self._exists(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"]):
                        self.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])

    def _drain_namespace(self, ns: str) -> None:
        for rt in self.registry.all():
            if not rt.namespaced:
                continue
            for (obj_ns, name), obj in list(self._bucket(rt).items()):
                if obj_ns == ns and not obj["metadata"].get("deletionTimestamp"):
                    self.delete(rt, ns, name)
        self._maybe_finish_namespace(ns)

    def _maybe_finish_namespace(self, ns: str) -> None:
        rt = self._rt("", "namespaces")
        nsobj = self._bucket(rt).get(("", ns))
        if nsobj and nsobj["metadata"].get("deletionTimestamp") and not self._namespace_blocked(rt, nsobj):
            self._hard_delete(rt, nsobj)

    # ------------------------------------------------------------------ CRDs

    def _establish_crd(self, rt: ResourceType, crd: dict[str, Any]) -> None:
        names = (crd.get("spec") or {}).get("names") or {}
        if not names.get("plural") or not names.get("kind") or not (crd.get("spec") or {}).get("group"):
            return
        self.registry.register_crd(crd)
        now = rfc3339(self.clock())
        status = {
            "acceptedNames": {k: v for k, v in names.items()},
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
        }
        current = self.get(rt, None, crd["metadata"]["name"])
        updated = copy.deepcopy(current)
        updated["status"] = status
        self._commit(rt, None, current, updated)

    # ------------------------------------------------------------------ eviction

    def evict(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """Evict a pod unless a PodDisruptionBudget forbids it (429 TooManyRequests)."""
        pods = self._rt("", "pods")
        pod = self.get(pods, namespace, name)
        if isinstance(body, dict) and body.get("kind") not in (None, "Eviction"):
            raise errors.bad_request(f"expected an Eviction, got {body.get('kind')}")
        budgets = [
            pdb
            for pdb in self.list(self._rt("policy", "poddisruptionbudgets"), namespace)[0]
            if matches(
                selector_from_object((pdb.get("spec") or {}).get("selector")), pod["metadata"].get("labels")
            )
        ]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        phase = (pod.get("status") or {}).get("phase")
        # Pending and finished pods may always go, as may a pod already being deleted.
        if budgets and phase == "Running" and not pod["metadata"].get("deletionTimestamp"):
            pdb = budgets[0]
            healthy, desired, _expected = self.budget_numbers(pdb)
            # A healthy pod may go if one more healthy pod than the budget needs is there; an
            # unhealthy one if the budget is met without it (unhealthyPodEvictionPolicy IfHealthyBudget).
            allowed = healthy - desired > 0 if pod_ready(pod) else healthy >= desired
            if not allowed:
                pdb_name = pdb["metadata"]["name"]
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    causes=[
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently",
                        }
                    ],
                )
        options = (body or {}).get("deleteOptions") if isinstance(body, dict) else None
        self.delete(pods, namespace, name, options)
        return errors.success_status(name, "", "pods", pod["metadata"]["uid"])

    def budget_numbers(self, pdb: dict[str, Any]) -> tuple[int, int, int]:
        """(currently healthy, desired healthy, expected) pods of a PodDisruptionBudget."""
        spec = pdb.get("spec") or {}
        selector = selector_from_object(spec.get("selector"))
        pods = [
            p
            for p in self.list(self._rt("", "pods"), pdb["metadata"]["namespace"])[0]
            if matches(selector, p["metadata"].get("labels"))
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        # Like the disruption controller: a controller's scale counts, not the pods alive right now.
        expected = 0
        scaled: set[str] = set()
        for p in pods:
            ref = next((r for r in p["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            owner = self._owner(p["metadata"]["namespace"], ref) if ref else None
            replicas = (
                (owner or {}).get("spec", {}).get("replicas")
                if ref and ref.get("kind") != "DaemonSet"
                else None
            )
            if owner is None or replicas is None:
                expected += 1
            elif ref["uid"] not in scaled:
                scaled.add(ref["uid"])
                expected += int(replicas)
        healthy = sum(1 for p in pods if pod_ready(p))

        def amount(value: Any) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return math.ceil(expected * int(value[:-1]) / 100)
            return int(value)

        if spec.get("minAvailable") is not None:
            desired = amount(spec["minAvailable"])
        elif spec.get("maxUnavailable") is not None:
            desired = max(expected - amount(spec["maxUnavailable"]), 0)
        else:
            desired = 0
        return healthy, desired, expected

    def _owner(self, namespace: str, ref: dict[str, Any]) -> dict[str, Any] | None:
        plural = {
            "StatefulSet": "statefulsets",
            "Deployment": "deployments",
            "ReplicaSet": "replicasets",
            "DaemonSet": "daemonsets",
        }.get(ref.get("kind", ""))
        if plural is None:
            return None
        owner = self._bucket(self._rt("apps", plural)).get((namespace, ref.get("name", "")))
        return owner if owner and owner["metadata"]["uid"] == ref.get("uid") else None

    # ------------------------------------------------------------------ workload controller

    def _after_write(self, rt: ResourceType, obj: dict[str, Any] | None) -> None:
        if not self.workloads or self._reconciling:
            return
        if rt.key in (
            ("apps", "statefulsets"),
            ("apps", "deployments"),
            ("apps", "daemonsets"),
            ("", "nodes"),
            ("", "pods"),
        ):
            self._reconciling = True
            try:
                self.reconcile_workloads()
            finally:
                self._reconciling = False

    def reconcile_workloads(self) -> None:
        """Create/delete pods so each StatefulSet/Deployment/DaemonSet has the pods it asks for
        (a deleted or evicted pod comes back, Pending, as the real controllers make it)."""
        pods = self._rt("", "pods")
        nodes = [n["metadata"]["name"] for n in self._bucket(self._rt("", "nodes")).values()]
        for key in (("apps", "statefulsets"), ("apps", "deployments"), ("apps", "daemonsets")):
            rt = self._rt(*key)
            for owner in list(self._bucket(rt).values()):
                meta = owner["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                ns = meta["namespace"]
                owned = {
                    p["metadata"]["name"]: p
                    for (pns, _), p in self._bucket(pods).items()
                    if pns == ns
                    and any(r.get("uid") == meta["uid"] for r in p["metadata"].get("ownerReferences") or [])
                }
                spec = owner.get("spec") or {}
                replicas = int(spec.get("replicas", 1))
                wanted: dict[str, str | None] = {}
                if key == ("apps", "statefulsets"):
                    wanted = {f"{meta['name']}-{i}": None for i in range(replicas)}
                elif key == ("apps", "daemonsets"):
                    by_node = {p["spec"].get("nodeName"): n for n, p in owned.items()}
                    wanted = {
                        by_node.get(node) or f"{meta['name']}-{secrets.token_hex(3)[:5]}": node
                        for node in nodes
                    }
                else:
                    keep = sorted(owned)[:replicas]
                    wanted = {n: None for n in keep}
                    while len(wanted) < replicas:
                        wanted[f"{meta['name']}-{secrets.token_hex(5)[:10]}-{secrets.token_hex(3)[:5]}"] = (
                            None
                        )
                for pod_name in sorted(set(owned) - set(wanted)):
                    self.delete(pods, ns, pod_name)
                for pod_name, node in wanted.items():
                    if pod_name not in owned and not self._namespace_terminating(ns):
                        self.create(pods, ns, self._pod_from_template(rt, owner, pod_name, node))

    def _namespace_terminating(self, ns: str) -> bool:
        nsobj = self._bucket(self._rt("", "namespaces")).get(("", ns))
        return nsobj is None or bool(nsobj["metadata"].get("deletionTimestamp"))

    def _pod_from_template(
        self, rt: ResourceType, owner: dict[str, Any], name: str, node: str | None
    ) -> dict[str, Any]:
        spec = owner.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        meta = template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        pod_spec = template.get("spec") or {}
        if rt.plural == "statefulsets":
            labels["statefulset.kubernetes.io/pod-name"] = name
            pod_spec.setdefault("hostname", name)
            if spec.get("serviceName"):
                pod_spec.setdefault("subdomain", spec["serviceName"])
            for claim in spec.get("volumeClaimTemplates") or []:
                claim_name = claim["metadata"]["name"]
                pvc_name = f"{claim_name}-{name}"
                pvcs = self._rt("", "persistentvolumeclaims")
                if not self._exists(pvcs, owner["metadata"]["namespace"], pvc_name):
                    self.create(
                        pvcs,
                        owner["metadata"]["namespace"],
                        {
                            "metadata": {"name": pvc_name, "labels": dict(labels)},
                            "spec": copy.deepcopy(claim.get("spec") or {}),
                        },
                    )
                pod_spec.setdefault("volumes", []).append(
                    {"name": claim_name, "persistentVolumeClaim": {"claimName": pvc_name}}
                )
        if node:
            pod_spec["nodeName"] = node
        return {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": rt.api_version,
                        "kind": rt.kind,
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }


def pod_ready(pod: dict[str, Any]) -> bool:
    """A pod counts as healthy when Running with condition Ready=True."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
