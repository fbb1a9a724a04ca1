"""spur-storage-local-path: a default, node-local RWO StorageClass under local_path_dir."""

import json

from spur.hookspecs import StorageContext
from spur.plugins import load_plugin_manager


def objects(path="/mnt/scratch/local-path"):
    pm = load_plugin_manager("storage", "local-path")
    return pm.hook.spur_storage_manifests(ctx=StorageContext(local_path_dir=path))


def test_default_storage_class():
    (sc,) = [o for o in objects() if o["kind"] == "StorageClass"]
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert sc["provisioner"] == "rancher.io/local-path"
    # node-local volumes: bound where the first consumer lands
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"


def test_volumes_live_under_local_path_dir():
    (cm,) = [o for o in objects("/data/lp") if o["kind"] == "ConfigMap"]
    config = json.loads(cm["data"]["config.json"])
    assert config["nodePathMap"] == [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/data/lp"]}]


def test_everything_is_a_complete_kubernetes_object():
    for obj in objects():
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
    kinds = [o["kind"] for o in objects()]
    assert kinds[0] == "Namespace" and "Deployment" in kinds and "ClusterRoleBinding" in kinds
