"""The operator's pure logic: SpurJob -> job spec and status, pod rendering and outcomes, Kubernetes
nodes -> registrations and states, GrpTRES -> quotas."""

from __future__ import annotations

import pytest

from spur.k8s.operator import nodes, pods, quota
from spur.k8s.operator import spurjobs as sj
from spur.rpc.proto import spur_pb2 as pb

TRAINING = {
    "apiVersion": "spur.amd.com/v1alpha1",
    "kind": "SpurJob",
    "metadata": {"name": "training-run", "namespace": "ml", "uid": "u-1", "generation": 1},
    "spec": {
        "script": "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH -N 2\n#SBATCH --gres=gpu:8\n"
        "torchrun --nnodes=2 train.py\n"
    },
}


# ------------------------------------------------------------------ SpurJob -> job


def test_sbatch_lines_are_honoured_and_the_uid_tags_the_job() -> None:
    spec = sj.build_spec(TRAINING, default_image="img:1")
    assert (spec.name, spec.num_nodes, spec.gres) == ("train", 2, ["gpu:8"])
    assert spec.comment == "spurjob-uid=u-1"
    assert spec.environment[sj.ENV_NAMESPACE] == "ml" and spec.environment[sj.ENV_IMAGE] == "img:1"
    assert spec.script == TRAINING["spec"]["script"]


def test_spec_fields_override_the_script_and_env_is_passed() -> None:
    obj = {
        **TRAINING,
        "spec": {
            "script": "#!/bin/sh\n#SBATCH -p small\n#SBATCH -t 10\ntrue\n",
            "partition": "big",
            "timeLimit": "1:00:00",
            "account": "physics",
            "image": "custom:2",
            "env": [{"name": "EPOCHS", "value": "3"}],
        },
    }
    spec = sj.build_spec(obj, default_image="img:1")
    assert (spec.partition, spec.time_limit_secs, spec.account) == ("big", 3600, "physics")
    assert spec.environment["EPOCHS"] == "3" and spec.environment[sj.ENV_IMAGE] == "custom:2"
    assert spec.name == "training-run"  # no --job-name: the object's name


def test_an_account_namespace_gives_the_account() -> None:
    obj = {**TRAINING, "metadata": {**TRAINING["metadata"], "namespace": "spur-acct-physics"}}
    assert sj.build_spec(obj, default_image="i").account == "physics"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("", "spec.script is required"),
        ("echo no shebang\n", "This does not look like a batch script"),
        ("#!/bin/sh\n#SBATCH --nodes=zero\ntrue\n", "\"zero\" is not a valid node count"),  # sbatch's words
    ],
)
def test_a_bad_script_is_one_clear_error(script: str, message: str) -> None:
    with pytest.raises(sj.SpurJobError) as err:
        sj.build_spec({**TRAINING, "spec": {"script": script}}, default_image="i")
    assert message in str(err.value)


def test_identity_rules() -> None:
    assert sj.identity_of(TRAINING, 65534) == sj.SpurJobIdentity("ml", 65534)
    annotated = {
        **TRAINING,
        "metadata": {
            **TRAINING["metadata"],
            "annotations": {sj.USER_ANNOTATION: "alice", sj.UID_ANNOTATION: "1000"},
        },
    }
    assert sj.identity_of(annotated, 65534) == sj.SpurJobIdentity("alice", 1000)
    bad = {**TRAINING, "metadata": {**TRAINING["metadata"], "annotations": {sj.UID_ANNOTATION: "x"}}}
    with pytest.raises(sj.SpurJobError):
        sj.identity_of(bad, 0)


def test_find_submitted_adopts_the_newest_job_with_the_tag() -> None:
    jobs = [
        pb.JobInfo(job_id=3, spec=pb.JobSpec(comment="spurjob-uid=u-1")),
        pb.JobInfo(job_id=5, spec=pb.JobSpec(comment="spurjob-uid=u-2")),
        pb.JobInfo(job_id=7, spec=pb.JobSpec(comment="spurjob-uid=u-1")),
    ]
    assert sj.find_submitted(jobs, "u-1").job_id == 7
    assert sj.find_submitted(jobs, "u-9") is None


def test_status_mirrors_the_job() -> None:
    running = pb.JobInfo(
        job_id=12, state="RUNNING", reason="None", nodelist="gpu-[1-2]", start_time=1700000000
    )
    assert sj.status_from_job(running, generation=1) == {
        "state": "RUNNING",
        "jobId": 12,
        "nodes": "gpu-[1-2]",
        "message": "",
        "startTime": "2023-11-14T22:13:20Z",
        "observedGeneration": 1,
    }
    failed = pb.JobInfo(
        job_id=12,
        state="FAILED",
        reason="NonZeroExitCode",
        exit_code=3,
        start_time=1700000000,
        end_time=1700000060,
    )
    status = sj.status_from_job(failed)
    assert (status["exitCode"], status["message"], status["endTime"]) == (
        3,
        "NonZeroExitCode",
        "2023-11-14T22:14:20Z",
    )
    assert sj.status_changes(status, status) == {}
    assert sj.status_changes({"state": "RUNNING"}, {"state": "FAILED", "jobId": 12}) == {
        "state": "FAILED",
        "jobId": 12,
    }


def test_finalizer_helpers() -> None:
    assert sj.with_finalizer(TRAINING) == [sj.FINALIZER]
    held = {"metadata": {"finalizers": ["other", sj.FINALIZER]}}
    assert sj.with_finalizer(held) is None
    assert sj.without_finalizer(held) == ["other"]
    assert sj.without_finalizer(TRAINING) is None


# ------------------------------------------------------------------ pods


def _job(nodes_: int = 2, gpus: int = 8) -> pb.JobInfo:
    spec = sj.build_spec(TRAINING, default_image="img:1")
    from spur.rpc.convert import spec_to_proto

    return pb.JobInfo(
        job_id=42,
        spec=spec_to_proto(spec),
        user="ml",
        uid=65534,
        gid=65534,
        state="RUNNING",
        nodelist="gpu-[1-2]" if nodes_ == 2 else "gpu-1",
        partition="default",
        allocation=[
            pb.NodeAllocation(node=f"gpu-{i + 1}", cpus=4, mem_mb=1024, gpus=list(range(gpus)), tasks=1)
            for i in range(nodes_)
        ],
    )


def test_one_pod_per_node_pinned_with_requests_equal_to_limits() -> None:
    rendered = pods.render_pods(
        _job(),
        default_namespace="default",
        default_image="x",
        cluster_name="c",
        cluster_id="cid",
        gpu_resources={"gpu-2": "nvidia.com/gpu"},
    )
    assert [p["metadata"]["name"] for p in rendered] == ["spur-job-42-0", "spur-job-42-1"]
    assert [p["spec"]["nodeName"] for p in rendered] == ["gpu-1", "gpu-2"]
    first, second = (p["spec"]["containers"][0] for p in rendered)
    assert first["resources"]["requests"] == {"cpu": "4", "memory": "1024Mi", "amd.com/gpu": "8"}
    assert second["resources"]["limits"] == {"cpu": "4", "memory": "1024Mi", "nvidia.com/gpu": "8"}
    assert first["image"] == "img:1" and first["command"] == ["/bin/bash", "-c"]
    env = {e["name"]: e["value"] for e in second["env"]}
    assert env["SLURM_JOB_ID"] == "42" and env["SLURM_NODELIST"] == "gpu-[1-2]"
    assert (env["SLURM_PROCID"], env["RANK"], env["WORLD_SIZE"], env["SLURM_NODEID"]) == ("1", "1", "2", "1")
    assert env["MASTER_ADDR"] == "spur-job-42-0.spur-job-42" and env["MASTER_PORT"] == "29500"
    assert sj.ENV_NAMESPACE not in env
    labels = rendered[0]["metadata"]["labels"]
    assert labels[pods.JOB_ID_LABEL] == "42" and labels[pods.SPURJOB_LABEL] == "training-run"
    assert rendered[0]["metadata"]["namespace"] == "ml"
    assert rendered[1]["spec"]["subdomain"] == "spur-job-42"
    service = pods.render_service(_job(), default_namespace="default")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {pods.JOB_ID_LABEL: "42"}


def test_a_single_node_job_rendezvous_on_localhost() -> None:
    (pod,) = pods.render_pods(
        _job(1, 0),
        default_namespace="d",
        default_image="x",
        cluster_name="c",
        cluster_id="",
        gpu_resources={},
    )
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "localhost" and "subdomain" not in pod["spec"]
    assert "amd.com/gpu" not in pod["spec"]["containers"][0]["resources"]["requests"]


def _pod(phase: str, **state) -> dict:
    return {"metadata": {"name": "p"}, "status": {"phase": phase, "containerStatuses": [{"state": state}]}}


def test_pod_phases_drive_the_outcome() -> None:
    assert pods.job_outcome([_pod("Running", running={})], 1) is None
    assert pods.job_outcome([_pod("Succeeded", terminated={"exitCode": 0})], 2) is None  # one not seen yet
    assert pods.job_outcome([_pod("Succeeded", terminated={"exitCode": 0})] * 2, 2) == pods.Outcome()
    failed = pods.job_outcome([_pod("Failed", terminated={"exitCode": 3, "reason": "Error"})], 1)
    assert (failed.exit_code, failed.out_of_memory) == (3, False)
    oom = pods.job_outcome([_pod("Failed", terminated={"exitCode": 137, "reason": "OOMKilled"})], 1)
    assert oom.out_of_memory and oom.exit_code == 137
    pull = pods.job_outcome(
        [_pod("Pending", waiting={"reason": "ImagePullBackOff", "message": "no such image"})], 1
    )
    assert pull.launch_failed and pull.message == "pod p: ImagePullBackOff: no such image"


def test_a_time_limit_is_the_pods_deadline_and_ends_the_job_timed_out() -> None:
    job = _job(1, 0)
    job.time_limit_secs = 600
    (pod,) = pods.render_pods(
        job, default_namespace="d", default_image="x", cluster_name="c", cluster_id="", gpu_resources={}
    )
    assert pod["spec"]["activeDeadlineSeconds"] == 600
    expired = {"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "DeadlineExceeded"}}
    assert pods.job_outcome([expired], 1).timed_out


def test_interpreter_follows_the_shebang() -> None:
    assert pods.interpreter("#!/usr/bin/env python3\nprint()") == ["/usr/bin/env", "python3", "-c"]
    assert pods.interpreter("echo") == ["/bin/sh", "-c"]


# ------------------------------------------------------------------ nodes


def _node(ready: bool = True, unschedulable: bool = False, **allocatable: str) -> dict:
    return {
        "metadata": {"name": "gpu-1", "labels": {"pool": "a"}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": allocatable or {"cpu": "63500m", "memory": "512Gi", "amd.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
        },
    }


def test_registration_from_allocatable() -> None:
    req = nodes.registration(_node(), address="10.0.0.5", port=6818, version="0.1.0")
    assert (req.name, req.address, req.port, req.cpus, req.memory_mb) == (
        "gpu-1",
        "10.0.0.5",
        6818,
        63,
        524288,
    )
    assert [(g.index, g.vendor) for g in req.gpus] == [(i, "amd") for i in range(8)]
    nv = nodes.registration(
        _node(cpu="8", memory="16G", **{"nvidia.com/gpu": "2"}), address="a", port=1, version="v"
    )
    assert [g.vendor for g in nv.gpus] == ["nvidia", "nvidia"] and nv.memory_mb == 15258
    with pytest.raises(ValueError):
        nodes.parse_cpu("lots")


def test_ready_cordon_and_the_actions_they_need() -> None:
    assert nodes.desired_state(_node()) == "up"
    assert nodes.desired_state(_node(ready=False)) == "down"
    assert nodes.desired_state(_node(unschedulable=True)) == "drain"
    assert nodes.state_actions("down", "idle", "") == [("DOWN", nodes.DOWN_REASON)]
    assert nodes.state_actions("up", "down", nodes.DOWN_REASON) == [("RESUME", "")]
    assert nodes.state_actions("drain", "down", nodes.DOWN_REASON) == [
        ("RESUME", ""),
        ("DRAIN", nodes.DRAIN_REASON),
    ]
    assert nodes.state_actions("up", "drained", "maintenance") == []  # an admin's drain stays
    assert nodes.state_actions("up", "mixed", "") == []


def test_selector() -> None:
    assert nodes.parse_selector("pool=a, zone=z1") == {"pool": "a", "zone": "z1"}
    assert nodes.selected(_node(), {"pool": "a"}) and not nodes.selected(_node(), {"pool": "b"})
    with pytest.raises(ValueError):
        nodes.parse_selector("pool")


# ------------------------------------------------------------------ quota


def test_quota_from_grptres() -> None:
    assert quota.quota_hard("cpu=16,mem=32G,gres/gpu=8", ["amd.com/gpu"]) == {
        "requests.cpu": "16",
        "limits.cpu": "16",
        "requests.memory": "32768Mi",
        "limits.memory": "32768Mi",
        "requests.amd.com/gpu": "8",
    }
    assert quota.quota_hard("", ["amd.com/gpu"]) == {"pods": "0"}
    assert quota.quota_hard("node=2", ["amd.com/gpu"]) == {"pods": "0"}  # nothing Kubernetes can cap: closed


def test_account_records_and_stale_namespaces() -> None:
    records = [
        {"account": "root", "user": "", "partition": "", "grptres": ""},
        {"account": "phys", "user": "", "partition": "", "grptres": "cpu=4"},
        {"account": "phys", "user": "alice", "partition": "", "grptres": "cpu=1"},
    ]
    assert quota.account_limits(records) == {"phys": "cpu=4"}
    objs = quota.desired_objects("phys", "cpu=4", ["amd.com/gpu"])
    assert [o["kind"] for o in objs] == ["Namespace", "ResourceQuota", "LimitRange"]
    assert objs[0]["metadata"]["name"] == "spur-acct-phys"
    managed = {
        "metadata": {
            "name": "spur-acct-old",
            "labels": {quota.ACCOUNT_LABEL: "old", pods.MANAGED_BY_LABEL: pods.MANAGED_BY},
        }
    }
    assert quota.stale_namespaces([managed, objs[0]], ["phys"]) == [("spur-acct-old", "old")]


# ------------------------------------------------------------------ state


def test_remove_node_fails_its_jobs_and_forgets_the_node() -> None:
    from state_helpers import Log, register, submit

    from spur.core.job import JobState, NodeAllocation
    from spur.state import commands as c
    from spur.state.machine import Rejected

    log = Log()
    register(log, "n1")
    register(log, "n2")
    j = submit(log)
    log(c.StartJob(j, [NodeAllocation("n1", 1)], 1.0, 1))
    assert log(c.ForgetNode("n1", 5.0)) == [j]
    assert log.state.jobs[j].state is JobState.NODE_FAIL
    assert "n1" not in log.state.nodes and "n2" in log.state.nodes
    missing = log(c.ForgetNode("n1", 6.0))
    assert isinstance(missing, Rejected) and missing.code == "NOT_FOUND"
    assert log.state.node_state("n2") == "idle"


def test_an_oom_report_ends_the_job_out_of_memory() -> None:
    from state_helpers import Log, register, submit

    from spur.core.job import JobState, NodeAllocation
    from spur.state import commands as c

    log = Log()
    register(log, "n1")
    j = submit(log)
    log(c.StartJob(j, [NodeAllocation("n1", 1)], 1.0, 1))
    assert log(c.JobExited(j, "n1", 137, 0, 9.0, out_of_memory=True)) is True
    job = log.state.jobs[j]
    assert job.state is JobState.OUT_OF_MEMORY and job.state.is_terminal and job.state.short == "OOM"
    assert log.state.usage("n1").cpus == 0


# ------------------------------------------------------------------ configuration


def test_kube_api_from_flags_or_the_service_account(tmp_path, monkeypatch) -> None:
    from spur.k8s.operator import kube

    token = tmp_path / "token"
    token.write_text("sa-token\n")
    explicit = kube.KubeConfig.resolve("http://127.0.0.1:8080/", str(token), {})
    assert (explicit.server, explicit.token, explicit.ca_file) == ("http://127.0.0.1:8080", "sa-token", None)
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", tmp_path)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    in_cluster = kube.KubeConfig.resolve(
        None, None, {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert (in_cluster.server, in_cluster.token) == ("https://10.96.0.1:443", "sa-token")
    assert in_cluster.ca_file == str(tmp_path / "ca.crt")
    assert "sa-token" not in repr(in_cluster)
    with pytest.raises(ValueError, match="--kube-api"):
        kube.KubeConfig.resolve(None, None, {})
    ca = tmp_path / "api-ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    verified = kube.KubeConfig.resolve("https://127.0.0.1:6443", str(token), {}, ca_file=str(ca))
    assert verified.ca_file == str(ca)
    with pytest.raises(ValueError, match="--kube-ca .*no such file"):
        kube.KubeConfig.resolve("https://127.0.0.1:6443", None, {}, ca_file=str(tmp_path / "absent"))


def test_cli_errors_are_one_line_and_exit_codes(capsys) -> None:
    from spur.k8s.operator.main import main

    assert main(["--node-selector", "nokey"]) == 2
    assert "node selector item 'nokey' is not key=value" in capsys.readouterr().err
    assert main(["--auth-mode", "required"]) == 78
    assert "--auth-mode required needs a key" in capsys.readouterr().err
    assert main(["--kube-api", "http://127.0.0.1:1", "--listen", "nonsense"]) == 78
    assert "--listen must be host:port" in capsys.readouterr().err


def test_quantities_compare_by_value_as_the_server_canonicalises_them() -> None:
    from decimal import Decimal

    from spur.k8s.operator.quantity import quantity, same_quantities

    assert quantity("32768Mi") == quantity("32Gi") == Decimal(32 * 2**30)
    assert quantity("1000m") == quantity("1") and quantity("2k") == quantity("2000")
    assert quantity("1.5Gi") == quantity("1536Mi") and quantity("1e3") == 1000
    for bad in ("", "Gi", "12Qi", "1..5"):
        with pytest.raises(ValueError, match="not a Kubernetes quantity"):
            quantity(bad)
    assert same_quantities(
        {"requests.memory": "32Gi", "pods": "0"}, {"requests.memory": "32768Mi", "pods": 0}
    )
    assert not same_quantities({"cpu": "16"}, {"cpu": "16", "memory": "1Gi"})
    assert not same_quantities({"cpu": "16"}, {"cpu": "15"})


def test_stored_quota_specs_match_what_was_written() -> None:
    (_ns, rq, lr) = quota.desired_objects("a", "cpu=16,mem=32768,gres/gpu=8", ["amd.com/gpu"])
    stored_hard = {k: ("32Gi" if v == "32768Mi" else v) for k, v in rq["spec"]["hard"].items()}
    assert quota.spec_matches("ResourceQuota", {"hard": stored_hard}, rq["spec"])
    assert not quota.spec_matches("ResourceQuota", {"hard": {**stored_hard, "limits.cpu": "8"}}, rq["spec"])
    stored_limits = {"limits": [{**lr["spec"]["limits"][0], "default": {"cpu": "1000m", "memory": "1024Mi"}}]}
    assert quota.spec_matches("LimitRange", stored_limits, lr["spec"])
    assert not quota.spec_matches("LimitRange", {"limits": []}, lr["spec"])
