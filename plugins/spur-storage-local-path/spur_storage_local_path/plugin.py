"""Rancher's local-path-provisioner as the default StorageClass of a Spur-managed k0s cluster.

k0s ships no storage, so without this a PersistentVolumeClaim stays Pending. The objects returned
here are written by the control-plane agent into k0s's manifest-deployer directory, which k0s
applies by itself. Volumes are node-local (ReadWriteOnce) directories under ``local_path_dir``.
"""

from __future__ import annotations

import json
from typing import Any

from spur.hookspecs import StorageContext, hookimpl

NAMESPACE = "local-path-storage"
IMAGE = "rancher/local-path-provisioner:v0.0.31"
HELPER_IMAGE = "busybox:1.36"

SETUP = """#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
"""
TEARDOWN = """#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
"""


def manifests(local_path_dir: str) -> list[dict[str, Any]]:
    """The provisioner's namespace, RBAC, deployment, config and the default StorageClass."""
    meta = {"namespace": NAMESPACE}
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [local_path_dir]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "local-path-provisioner", **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "local-path-provisioner"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods",
                                                  "pods/log"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["persistentvolumes"],
                 "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},
                {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "local-path-provisioner"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "local-path-provisioner"},
            "subjects": [{"kind": "ServiceAccount", "name": "local-path-provisioner", "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "local-path-provisioner", **meta},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "local-path-provisioner"}},
                "template": {
                    "metadata": {"labels": {"app": "local-path-provisioner"}},
                    "spec": {
                        "serviceAccountName": "local-path-provisioner",
                        "containers": [{
                            "name": "local-path-provisioner",
                            "image": IMAGE,
                            "command": ["local-path-provisioner", "--debug", "start",
                                        "--config", "/etc/config/config.json"],
                            "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/config/"}],
                            "env": [{"name": "POD_NAMESPACE",
                                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                        }],
                        "volumes": [{"name": "config-volume", "configMap": {"name": "local-path-config"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", **meta},
            "data": {
                "config.json": json.dumps(config),
                "setup": SETUP,
                "teardown": TEARDOWN,
                "helperPod.yaml": json.dumps({
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper-pod"},
                    "spec": {"containers": [{"name": "helper-pod", "image": HELPER_IMAGE}]},
                }),
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "local-path",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "rancher.io/local-path",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]


class LocalPath:
    @hookimpl
    def spur_storage_manifests(self, ctx: StorageContext) -> list[dict[str, Any]]:
        return manifests(ctx.local_path_dir)


plugin = LocalPath()
