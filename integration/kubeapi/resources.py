"""The kinds the double serves, its discovery documents and request-path parsing (pure, no I/O).

Built-in kinds are a fixed table; ``Registry.register_crd`` adds the kinds a CustomResourceDefinition
defines (and ``unregister_crd`` removes them), so discovery changes the way it does on a real
cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One kind as the API serves it at ``/api[s]/<group>/<version>/.../<plural>``."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    #: custom resources patch with merge-patch only; built-ins also with strategic merge patch
    strategic: bool = True
    categories: tuple[str, ...] = ()
    #: CRD additionalPrinterColumns (name, type, jsonPath, description, priority, format)
    printer_columns: tuple[dict[str, Any], ...] = ()
    #: openAPIV3Schema of a custom resource version, if the CRD has one
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    def base_path(self, namespace: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool,
    short: Iterable[str] = (),
    status: bool = False,
    categories: Iterable[str] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=tuple(short),
        status_subresource=status,
        categories=tuple(categories),
    )


BUILTIN: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", False, ["ns"], status=True),
    _rt("", "v1", "nodes", "Node", False, ["no"], status=True),
    _rt("", "v1", "pods", "Pod", True, ["po"], status=True, categories=["all"]),
    _rt("", "v1", "services", "Service", True, ["svc"], status=True, categories=["all"]),
    _rt("", "v1", "endpoints", "Endpoints", True, ["ep"]),
    _rt("", "v1", "secrets", "Secret", True),
    _rt("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"]),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ["pvc"], status=True),
    _rt("", "v1", "resourcequotas", "ResourceQuota", True, ["quota"], status=True),
    _rt("", "v1", "limitranges", "LimitRange", True, ["limits"]),
    _rt("", "v1", "events", "Event", True, ["ev"]),
    _rt("apps", "v1", "statefulsets", "StatefulSet", True, ["sts"], status=True, categories=["all"]),
    _rt("apps", "v1", "daemonsets", "DaemonSet", True, ["ds"], status=True, categories=["all"]),
    _rt("apps", "v1", "deployments", "Deployment", True, ["deploy"], status=True, categories=["all"]),
    _rt("apps", "v1", "replicasets", "ReplicaSet", True, ["rs"], status=True, categories=["all"]),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"], status=True),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ["crd", "crds"],
        status=True,
    ),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", True),
)

#: Subresources served besides ``status``: (group, plural) -> {subresource: (group, version, kind)}
EXTRA_SUBRESOURCES: dict[tuple[str, str], dict[str, tuple[str, str, str]]] = {
    ("", "pods"): {"eviction": ("policy", "v1", "Eviction"), "log": ("", "v1", "Pod")},
}


class Registry:
    """The kinds served right now: the built-ins plus those of established CRDs."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._crd_kinds: dict[str, list[tuple[str, str]]] = {}
        for rt in BUILTIN:
            self._types[rt.key] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.get((group, plural))
        if rt is None or rt.version != version:
            return None
        return rt

    def by_key(self, group: str, plural: str) -> ResourceType | None:
        return self._types.get((group, plural))

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def register_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """Serve the kinds of ``crd`` (every served version). Returns them."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group", "")
        added: list[ResourceType] = []
        keys: list[tuple[str, str]] = []
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            # one version per (group, plural) here: the storage version wins, else the first served
            if (group, names.get("plural")) in keys and not version.get("storage"):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            rt = ResourceType(
                group=group,
                version=version["name"],
                plural=names.get("plural", ""),
                singular=names.get("singular") or names.get("kind", "").lower(),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status_subresource="status" in (version.get("subresources") or {}),
                strategic=False,
                categories=tuple(names.get("categories") or ()),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                schema=schema,
            )
            self._types[rt.key] = rt
            if rt.key not in keys:
                keys.append(rt.key)
            added = [a for a in added if a.key != rt.key] + [rt]
        self._crd_kinds[crd["metadata"]["name"]] = keys
        return added

    def crd_keys(self, name: str) -> list[tuple[str, str]]:
        """The (group, plural) keys CRD ``name`` serves."""
        return list(self._crd_kinds.get(name, []))

    def unregister_crd(self, name: str) -> list[tuple[str, str]]:
        keys = self._crd_kinds.pop(name, [])
        for key in keys:
            self._types.pop(key, None)
        return keys

    # ------------------------------------------------------------------ discovery

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions (the core group is ``""``)."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def api_versions(self) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
        }

    def api_group_list(self) -> dict[str, Any]:
        groups = []
        for name, versions in sorted(self.groups().items()):
            if not name:
                continue
            gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
            groups.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.groups().get(group)
        if not versions or not group:
            return None
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": gvs,
            "preferredVersion": gvs[0],
        }

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = [rt for rt in self._types.values() if rt.group == group and rt.version == version]
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for rt in sorted(types, key=lambda r: r.plural):
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(ALL_VERBS),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            if rt.status_subresource:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            for sub, (g, v, kind) in EXTRA_SUBRESOURCES.get(rt.key, {}).items():
                resources.append(
                    {
                        "name": f"{rt.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "group": g,
                        "version": v,
                        "kind": kind,
                        "verbs": ["create"] if sub == "eviction" else ["get"],
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


# ---------------------------------------------------------------------- request paths


@dataclass(frozen=True)
class ResourcePath:
    """A parsed resource URL: ``/api/v1/namespaces/ns/pods/name/status`` and the like."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_resource_path(path: str) -> ResourcePath | None:
    """Parse a resource path; discovery paths and anything else give ``None``."""
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    if (
        rest[0] == "namespaces"
        and len(rest) >= 3
        and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
    ):
        namespace = rest[1]
        rest = rest[2:]
    else:
        namespace = None
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = "/".join(rest[2:]) if len(rest) > 2 else None
    return ResourcePath(group, version, plural, namespace, name, sub)


# ---------------------------------------------------------------------- OpenAPI v3 (enough for kubectl)


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root(registry: Registry) -> dict[str, Any]:
    """``/openapi/v3``: where each group version's document is."""
    paths = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


def openapi_group_version(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """``/openapi/v3/<gv>``: one PATCH operation per kind, tagged with its group-version-kind.

    This is what kubectl reads to decide that the server validates fields itself (the
    ``fieldValidation`` query parameter) instead of validating on the client. The request bodies
    list merge-patch and JSON patch only, so ``kubectl apply`` computes strategic merge patches
    from its own compiled-in types rather than from schemas the double does not publish.
    """
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    if not types:
        return None
    params = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in ("dryRun", "fieldManager", "fieldValidation")
    ]
    paths: dict[str, Any] = {}
    for rt in types:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = rt.base_path("{namespace}" if rt.namespaced else None)
        op = {
            "operationId": f"patch{rt.kind}",
            "parameters": params,
            "requestBody": {
                "content": {"application/merge-patch+json": {}, "application/json-patch+json": {}}
            },
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        create = {
            **op,
            "operationId": f"create{rt.kind}",
            "x-kubernetes-action": "post",
            "requestBody": {"content": {"*/*": {}}},
        }
        paths[base] = {"post": create}
        paths[f"{base}/{{name}}"] = {"patch": op}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }
