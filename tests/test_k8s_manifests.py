"""examples/k8s: every manifest validates offline against the official Kubernetes schemas (strict),
the SpurJob of the guide validates against the CRD's own schema, and the manifests say what the
deployment guide promises (ports, Secret, probes, RBAC verbs, PDB)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "k8s"
MANIFESTS = [
    "namespace.yaml",
    "rbac.yaml",
    "spurjob-crd.yaml",
    "spurctld.yaml",
    "spurd.yaml",
    "operator.yaml",
    "pdb.yaml",
]
KUBERNETES_VERSION = "1.32"

TRAINING_RUN = {
    "apiVersion": "spur.amd.com/v1alpha1",
    "kind": "SpurJob",
    "metadata": {"name": "training-run"},
    "spec": {
        "script": "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH -N 2\n#SBATCH --gres=gpu:8\ntorchrun --nnodes=2 train.py\n"
    },
}


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def by_kind(name: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs(name)}


def test_the_manifest_set_is_complete() -> None:
    present = sorted(p.name for p in EXAMPLES.iterdir())
    assert present == sorted([*MANIFESTS, "spur.conf"])


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_validates_strictly(name: str) -> None:
    for doc in docs(name):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_strict_validation_catches_unknown_fields() -> None:
    sts = by_kind("spurctld.yaml")["StatefulSet"]
    sts["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, KUBERNETES_VERSION, strict=True)


def _crd_schema() -> dict[str, Any]:
    crd = by_kind("spurjob-crd.yaml")["CustomResourceDefinition"]
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_spurjob_validates_against_the_crd_schema() -> None:
    schema = _crd_schema()
    jsonschema.validate(TRAINING_RUN, schema)
    with_status = {
        **TRAINING_RUN,
        "status": {
            "state": "RUNNING",
            "jobId": 12,
            "nodes": "gpu-[1-2]",
            "message": "",
            "startTime": "2026-01-01T00:00:00Z",
            "exitCode": 0,
        },
    }
    jsonschema.validate(with_status, schema)
    for bad in (
        {**TRAINING_RUN, "spec": {}},
        {**TRAINING_RUN, "spec": {"script": 3}},
        {**TRAINING_RUN, "status": {"jobId": "twelve"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_crd_shape() -> None:
    crd = by_kind("spurjob-crd.yaml")["CustomResourceDefinition"]
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "spurjobs.spur.amd.com"
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "spur.amd.com",
        "Namespaced",
        "SpurJob",
        "spurjobs",
    )
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["State", "JobID", "Nodes", "Age"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"state", "jobId", "nodes", "message", "startTime", "endTime", "exitCode"} <= set(status)
    assert version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] == ["script"]


def test_controller_statefulset_and_service() -> None:
    svc, sts = by_kind("spurctld.yaml")["Service"], by_kind("spurctld.yaml")["StatefulSet"]
    assert svc["metadata"]["name"] == "spurctld" and svc["spec"]["clusterIP"] == "None"
    assert sorted(p["port"] for p in svc["spec"]["ports"]) == [6817, 6820, 6821]
    assert sts["spec"]["serviceName"] == "spurctld" and sts["spec"]["replicas"] == 3
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["tcpSocket"]["port"] == 6817
    (config,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "spur-config"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert container["args"][container["args"].index("-f") + 1] == f"{mounts[config['name']]}/spur.conf"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert mounts[claim["metadata"]["name"]] == container["args"][container["args"].index("--state-dir") + 1]
    assert pod["securityContext"]["runAsNonRoot"] is True


def _tls_files_copied_for(pod: dict[str, Any], container: dict[str, Any]) -> str:
    """Where the pod's init container puts the Secret spur-tls's files (the key 0600) for ``container``."""
    (secret,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "spur-tls"]
    (init,) = pod["initContainers"]
    init_mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    script = init["command"][-1]
    assert f"install -m 0600 {init_mounts[secret['name']]}/tls.key" in script
    (copied,) = [m for m in init["volumeMounts"] if m["name"] != secret["name"]]
    assert {v["name"]: v for v in pod["volumes"]}[copied["name"]]["emptyDir"] == {"medium": "Memory"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[copied["name"]] == copied["mountPath"] and secret["name"] not in mounts
    return copied["mountPath"]


def test_every_daemon_runs_tls_required_from_the_secret() -> None:
    import tomllib

    conf = tomllib.loads((EXAMPLES / "spur.conf").read_text())["tls"]
    assert conf["mode"] == "required"
    sts = by_kind("spurctld.yaml")["StatefulSet"]["spec"]["template"]["spec"]
    where = _tls_files_copied_for(sts, sts["containers"][0])
    assert (conf["cert_file"], conf["key_file"], conf["ca_file"]) == (
        f"{where}/tls.crt",
        f"{where}/tls.key",
        f"{where}/ca.crt",
    )
    op = by_kind("operator.yaml")["Deployment"]["spec"]["template"]["spec"]
    where = _tls_files_copied_for(op, op["containers"][0])
    args = op["containers"][0]["args"]
    assert "--tls-mode=required" in args and f"--tls-key={where}/tls.key" in args
    assert f"--tls-cert={where}/tls.crt" in args and f"--tls-ca={where}/ca.crt" in args
    # spurd runs as root: the Secret is mounted as root's own (0400), its [tls] comes from a ConfigMap.
    ds = by_kind("spurd.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = ds["containers"]
    volumes = {v["name"]: v for v in ds["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (tls,) = [n for n, v in volumes.items() if v.get("secret", {}).get("secretName") == "spur-tls"]
    assert volumes[tls]["secret"]["defaultMode"] == 0o400
    (cm,) = [n for n, v in volumes.items() if "configMap" in v]
    assert container["args"][container["args"].index("-f") + 1] == f"{mounts[cm]}/spurd.conf"
    spurd_conf = tomllib.loads(by_kind("spurd.yaml")["ConfigMap"]["data"]["spurd.conf"])["tls"]
    assert spurd_conf["mode"] == "required" and spurd_conf["key_file"] == f"{mounts[tls]}/tls.key"


def test_agent_and_operator_reach_the_controller_with_a_scheme() -> None:
    ds = by_kind("spurd.yaml")["DaemonSet"]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--controller") + 1] == "http://spurctld.spur.svc.cluster.local:6817"
    op = by_kind("operator.yaml")["Deployment"]
    pod = op["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "spur-operator"
    (container,) = pod["containers"]
    assert container["command"] == ["spur-k8s-operator"]
    assert (
        container["args"][container["args"].index("--controller") + 1]
        == "http://spurctld.spur.svc.cluster.local:6817"
    )
    text = (EXAMPLES / "operator.yaml").read_text()
    assert '# - "--auth-mode=required"' in text
    assert "# - name: SPUR_JWT_KEY" in text and "#     secretKeyRef:" in text


def test_rbac_grants_exactly_the_operators_calls() -> None:
    role = by_kind("rbac.yaml")["ClusterRole"]
    grants = {
        (g, r): sorted(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    # What spur.k8s.operator calls (kube.py verbs: get, list, watch, create, merge_patch=patch,
    # replace=update, delete), per resource.
    assert grants == {
        ("spur.amd.com", "spurjobs"): ["list", "patch", "watch"],
        ("spur.amd.com", "spurjobs/status"): ["patch"],
        ("", "pods"): ["create", "delete", "list", "watch"],
        ("", "services"): ["create", "delete", "list"],
        ("", "nodes"): ["list", "watch"],
        ("", "namespaces"): ["create", "get", "list", "patch"],
        ("", "resourcequotas"): ["create", "delete", "get", "update"],
        ("", "limitranges"): ["create", "delete", "get", "update"],
    }
    role = by_kind("rbac.yaml")["Role"]  # the node credentials Secret, in the operator's namespace
    assert role["metadata"]["namespace"] == "spur"
    assert [(r["apiGroups"], r["resources"], sorted(r["verbs"])) for r in role["rules"]] == [
        ([""], ["secrets"], ["create", "get", "patch"])
    ]
    assert by_kind("rbac.yaml")["RoleBinding"]["roleRef"]["name"] == "spur-operator"
    binding = by_kind("rbac.yaml")["ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "spur-operator", "namespace": "spur"}]


def test_pdb_keeps_a_raft_majority() -> None:
    pdb = by_kind("pdb.yaml")["PodDisruptionBudget"]
    sts = by_kind("spurctld.yaml")["StatefulSet"]
    assert pdb["spec"]["selector"] == sts["spec"]["selector"]
    assert pdb["spec"]["minAvailable"] == sts["spec"]["replicas"] // 2 + 1


def test_everything_lives_in_the_spur_namespace() -> None:
    assert by_kind("namespace.yaml")["Namespace"]["metadata"]["name"] == "spur"
    for name in MANIFESTS:
        for doc in docs(name):
            if doc["kind"] not in (
                "Namespace",
                "ClusterRole",
                "ClusterRoleBinding",
                "CustomResourceDefinition",
            ):
                assert doc["metadata"]["namespace"] == "spur", (name, doc["kind"])
