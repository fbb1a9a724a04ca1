"""spur-k8s-operator end to end: real spurctld, the operator as a process, an API server (the Kubernetes
API double, and the real kube-apiserver v1.20.2 in a namespace of the test's own: ``kube_backend``),
kubectl as the user's client and the harness's kubelet moving pods through their phases by the API."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from integration.harness import wait_for
from integration.kubeapi.kubectl import KUBECTL
from integration.operator_harness import TRAINING_RUN, KubeBackend, operator_env, spurjob
from spur.k8s.operator.quantity import same_quantities

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _squeue(env) -> list[list[str]]:
    out = env.cluster.cli("squeue", "-h", "-o", "%i %T %D %N").stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def test_training_run_from_apply_to_sacct(tmp_path: Path, kube_backend: KubeBackend) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        nodes = {n.name: n for n in env.cluster.nodes()}
        assert len(nodes["gpu-node-1"].gpus) == 8 and nodes["gpu-node-1"].cpus == 64

        assert env.apply(TRAINING_RUN) == "spurjob.spur.amd.com/training-run created\n"
        (row,) = wait_for(lambda: _squeue(env), timeout=30, what="the job in squeue")
        job_id = int(row[0])
        assert row[2] == "2"

        pods = env.wait_pods(job_id, 2)
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-node-1", "gpu-node-2"]
        for pod in pods:
            (container,) = pod["spec"]["containers"]
            assert container["resources"]["requests"]["amd.com/gpu"] == "8"
            assert container["resources"]["limits"] == container["resources"]["requests"]
            env_vars = {e["name"]: e["value"] for e in container["env"]}
            assert env_vars["SLURM_JOB_ID"] == str(job_id)
            assert env_vars["WORLD_SIZE"] == "2"
            assert env_vars["RANK"] == env_vars["SLURM_PROCID"]
            assert env_vars["MASTER_ADDR"] == f"spur-job-{job_id}-0.spur-job-{job_id}"
            assert "torchrun --nnodes=2 train.py" in container["args"][0]
        service = json.loads(env.kubectl("get", "service", f"spur-job-{job_id}", "-o", "json").stdout)
        assert service["spec"]["clusterIP"] == "None"

        assert env.wait_state("training-run", "RUNNING") == "RUNNING"
        env.set_phase(pods, "Running")
        env.set_phase(pods, "Succeeded")
        env.wait_state("training-run", "COMPLETED")
        obj = env.spurjob("training-run")
        assert obj["status"]["jobId"] == job_id
        assert obj["status"]["exitCode"] == 0
        assert obj["status"]["nodes"] == "gpu-node-[1-2]"
        assert "endTime" in obj["status"] and "startTime" in obj["status"]

        sacct = env.cluster.cli(
            "sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "JobID,JobName,State,NNodes"
        )
        assert sacct.stdout.split("\n")[0] == f"{job_id}|train|COMPLETED|2"


def test_failing_oom_and_image_pull_pods(tmp_path: Path, kube_backend: KubeBackend) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        for name in ("fails", "oom", "badimage"):
            env.apply(spurjob(name, ["#SBATCH -N 1", "python train.py"]))
        env.apply(spurjob("slow", ["#SBATCH -N 1", "#SBATCH --time=1", "sleep 1000"]))
        ids = {
            name: wait_for(lambda n=name: env.spurjob(n).get("status", {}).get("jobId"), timeout=30)
            for name in ("fails", "oom", "badimage", "slow")
        }
        pods = {name: env.wait_pods(job_id, 1) for name, job_id in ids.items()}
        env.set_phase(pods["fails"], "Failed", exit_code=3)
        env.set_phase(pods["oom"], "Failed", exit_code=137, reason="OOMKilled")
        env.set_phase(pods["badimage"], "Pending", reason="ErrImagePull", message="pull access denied")
        assert pods["slow"][0]["spec"]["activeDeadlineSeconds"] == 60
        env.set_phase(pods["slow"], "Failed", reason="DeadlineExceeded")

        env.wait_state("fails", "FAILED")
        assert env.spurjob("fails")["status"]["exitCode"] == 3
        env.wait_state("oom", "OUT_OF_MEMORY")
        env.wait_state("badimage", "FAILED")
        assert "ErrImagePull" in env.spurjob("badimage")["status"]["message"]
        env.wait_state("slow", "TIMEOUT")
        sacct = env.cluster.cli("sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode").stdout
        states = dict(line.split("|")[:2] for line in sacct.splitlines() if line)
        assert states[str(ids["fails"])] == "FAILED"
        assert states[str(ids["oom"])] == "OUT_OF_MEMORY"


def test_deleting_the_spurjob_cancels_the_job_and_removes_its_pods(
    tmp_path: Path, kube_backend: KubeBackend
) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        env.apply(TRAINING_RUN)
        env.wait_state("training-run", "RUNNING")
        job_id = env.spurjob("training-run")["status"]["jobId"]
        assert env.spurjob("training-run")["metadata"]["finalizers"] == ["spur.amd.com/cancel-job"]
        env.set_phase(env.wait_pods(job_id, 2), "Running")

        env.kubectl("delete", "spurjob", "training-run", timeout=60)
        assert env.kubectl("get", "spurjobs", "-o", "name").stdout == ""
        env.cluster.wait_job(job_id, "CANCELLED")
        wait_for(lambda: env.pods(job_id) == [], timeout=30, what="the job's pods to be deleted")
        assert (
            env.kubectl("get", "services", "-l", f"spur.amd.com/job-id={job_id}", "-o", "name").stdout == ""
        )


def test_operator_killed_and_restarted_mid_run_submits_nothing_twice(
    tmp_path: Path, kube_backend: KubeBackend
) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        job_id, pods = env.start_running(TRAINING_RUN)

        env.operator.kill(signal.SIGKILL)
        env.set_phase(pods, "Succeeded")  # the job ends while no operator watches
        env.start_operator()
        env.wait_state("training-run", "COMPLETED")
        sacct = env.cluster.cli("sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State").stdout.splitlines()
        assert sacct == [f"{job_id}|train|COMPLETED"]


def test_a_job_submitted_before_a_crash_is_adopted_not_resubmitted(
    tmp_path: Path, kube_backend: KubeBackend
) -> None:
    """The operator died between SubmitJob and the status write: the job carrying the object's
    submit tag is adopted when the operator comes back."""
    with operator_env(tmp_path, kube_backend) as env:
        env.apply(spurjob("adopt-me", ["#SBATCH -N 1", "echo hi"]))
        uid = env.spurjob("adopt-me")["metadata"]["uid"]
        job_id = env.cluster.submit_spec(
            name="adopt-me", script="#!/bin/bash\necho hi\n", comment=f"spurjob-uid={uid}", num_nodes=1
        )
        env.start_operator()
        wait_for(lambda: env.spurjob("adopt-me").get("status", {}).get("jobId") == job_id, timeout=30)
        env.wait_state("adopt-me", "RUNNING")
        assert [row[0] for row in _squeue(env)] == [str(job_id)]
        assert "adopting job" in env.operator.log()


def _node_states(env) -> dict[str, tuple[str, str]]:
    return {n.name: (n.state, n.reason) for n in env.cluster.nodes()}


def test_node_watcher_follows_ready_cordon_and_deletion(tmp_path: Path, kube_backend: KubeBackend) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        node = next(n for n in env.cluster.nodes() if n.name == "gpu-node-1")
        assert (node.address, node.port) == ("127.0.0.1", env.agent_port)
        sinfo = env.cluster.cli("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
        assert "gpu-node-1 idle" in sinfo

        env.kubelet.set_node_ready("gpu-node-1", False)
        wait_for(lambda: _node_states(env)["gpu-node-1"] == ("down", "kubernetes node NotReady"), timeout=20)
        env.kubelet.set_node_ready("gpu-node-1", True)
        env.wait_nodes("gpu-node-1")

        env.kubectl("cordon", "gpu-node-2")
        wait_for(
            lambda: _node_states(env)["gpu-node-2"] == ("drained", "kubernetes node cordoned"), timeout=20
        )
        env.kubectl("uncordon", "gpu-node-2")
        env.wait_nodes("gpu-node-2")

        # an administrator's own drain is left alone when the node is Ready
        env.cluster.cli("scontrol", "update", "NodeName=gpu-node-2", "State=DRAIN", "Reason=maintenance")
        env.kubectl("label", "node", "gpu-node-2", "rack=r1")
        wait_for(lambda: _node_states(env)["gpu-node-2"] == ("drained", "maintenance"), timeout=20)

        env.kubectl("delete", "node", "gpu-node-1")
        wait_for(lambda: "gpu-node-1" not in _node_states(env), timeout=20, what="gpu-node-1 removed")
        env.kubelet.add_node("gpu-node-3", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"})
        env.wait_nodes("gpu-node-3")
        node3 = next(n for n in env.cluster.nodes() if n.name == "gpu-node-3")
        assert [g.vendor for g in node3.gpus] == ["nvidia"] * 4 and node3.cpus == 32


def test_a_refused_registration_is_retried_at_the_nodes_next_event(
    tmp_path: Path, kube_backend: KubeBackend
) -> None:
    with operator_env(tmp_path, kube_backend, conf_extra='[admission]\nmode = "token"\n') as env:
        env.start_operator()
        refused = "controller refused node gpu-node-1"
        wait_for(lambda: refused in env.operator.log(), timeout=20, what="the refusal in the log")
        assert env.operator.alive() and _node_states(env) == {}
        before = env.operator.log().count(refused)
        env.kubectl("label", "node", "gpu-node-1", "rack=r1")  # the node's next event
        wait_for(lambda: env.operator.log().count(refused) > before, timeout=20, what="a second attempt")

        token = env.cluster.cli("spur", "token", "create", "--uses", "2").stdout.split()[-1]
        env.operator.kill(signal.SIGKILL)
        # on the real server the operator's role may keep it only in namespace spur (rbac.yaml's Role)
        where = "spur" if kube_backend.is_real else env.namespace
        env.kubectl("delete", "secret", "spur-node-credentials", "-n", where, "--ignore-not-found")
        secret = ["--credential-secret", f"{where}/spur-node-credentials"]
        env.start_operator("--join-token", token, *secret)
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        stored = json.loads(
            env.kubectl("get", "secret", "spur-node-credentials", "-n", where, "-o", "json").stdout
        )
        assert sorted(stored["data"]) == ["gpu-node-1", "gpu-node-2"]
        # restarted with its token used up, the operator presents the kept credentials
        env.operator.kill(signal.SIGKILL)
        refusals = env.cluster.controller.log().count("refused node")
        env.start_operator("--join-token", token, *secret)
        wait_for(lambda: env.operator.log().count("registered node") >= 4, timeout=20, what="re-registration")
        assert token.split(".")[1] not in env.operator.log()
        # heartbeats carry each node's credential: the nodes stay up past node_timeout_secs
        env.apply(spurjob("after-admission", ["#SBATCH -N 2", "true"]))
        job_id = wait_for(lambda: env.spurjob("after-admission").get("status", {}).get("jobId"), timeout=30)
        pods = env.wait_pods(job_id, 2)
        env.set_phase(pods, "Succeeded")
        env.wait_state("after-admission", "COMPLETED")
        assert env.cluster.controller.log().count("refused node") == refusals


def _quota(env, account: str) -> dict | None:
    out = env.kubectl(
        "get", "resourcequota", "spur-quota", "-n", f"spur-acct-{account}", "-o", "json", check=False
    )
    return json.loads(out.stdout)["spec"]["hard"] if out.returncode == 0 else None


def test_quota_follows_grptres_and_account_deletion(tmp_path: Path, kube_backend: KubeBackend) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.cluster.cli("sacctmgr", "-i", "add", "account", "myaccount")
        env.start_operator("--enable-quota", "--quota-interval", "0.5")
        assert wait_for(lambda: _quota(env, "myaccount"), timeout=20) == {"pods": "0"}  # closed
        ns = json.loads(env.kubectl("get", "namespace", "spur-acct-myaccount", "-o", "json").stdout)
        assert ns["metadata"]["labels"]["spur.amd.com/account"] == "myaccount"
        limits = json.loads(
            env.kubectl(
                "get", "limitrange", "spur-defaults", "-n", "spur-acct-myaccount", "-o", "json"
            ).stdout
        )
        assert limits["spec"]["limits"][0]["defaultRequest"] == {"cpu": "1", "memory": "1Gi"}

        env.cluster.cli(
            "sacctmgr",
            "-i",
            "modify",
            "account",
            "name=myaccount",
            "set",
            "grptres=cpu=16,mem=32768,gres/gpu=8",
        )
        want = {
            "requests.cpu": "16",
            "limits.cpu": "16",
            "requests.memory": "32768Mi",
            "limits.memory": "32768Mi",
            "requests.amd.com/gpu": "8",
        }
        # by value: the real server stores quantities canonicalised (32768Mi reads back as 32Gi)
        wait_for(
            lambda: same_quantities(_quota(env, "myaccount"), want),
            timeout=10,
            what="the quota to follow GrpTRES",
        )
        # and the operator leaves it alone then: a later pass (the one that makes the next account's
        # quota) does not write it again (the server would take an unchanged PUT without a trace)
        updates = env.operator.log().count("updated ResourceQuota spur-acct-myaccount/")
        env.cluster.cli("sacctmgr", "-i", "add", "account", "zaccount")
        wait_for(lambda: _quota(env, "zaccount"), timeout=20, what="a later pass")
        assert env.operator.log().count("updated ResourceQuota spur-acct-myaccount/") == updates

        env.cluster.cli("sacctmgr", "-i", "delete", "account", "name=myaccount")
        wait_for(lambda: _quota(env, "myaccount") is None, timeout=10, what="the quota to be deleted")
        gone = env.kubectl("get", "limitrange", "-n", "spur-acct-myaccount", "-o", "name").stdout
        assert gone == ""


def test_a_transport_error_during_registration_restarts_the_watcher(
    tmp_path: Path, kube_backend: KubeBackend
) -> None:
    import os

    import httpx

    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator(
            "--request-timeout", "1", "--keepalive-interval", "0.5", "--keepalive-timeout", "0.5"
        )
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        health = f"http://127.0.0.1:{env.health_port}"
        assert wait_for(lambda: httpx.get(f"{health}/readyz").status_code == 200, timeout=10)
        assert httpx.get(f"{health}/healthz").text == "ok\n"

        pid = env.cluster.controller.popen.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            env.kubelet.add_node("gpu-node-3", {"cpu": "16", "memory": "64Gi"})
            wait_for(
                lambda: "node watcher restarting after a transport error" in env.operator.log(),
                timeout=20,
                what="the watcher to restart",
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        env.wait_nodes("gpu-node-1", "gpu-node-2", "gpu-node-3")
        metrics = httpx.get(f"{health}/metrics").text
        assert "spur_operator_node_watcher_restarts " in metrics
        restarts = next(
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("spur_operator_node_watcher_restarts ")
        )
        assert restarts >= 1
        assert "spur_operator_nodes_registered 3.0" in metrics
        assert 'spur_operator_controller_transport_errors_total{channel="node-watcher"}' in metrics


def test_controller_leader_killed_mid_run(tmp_path: Path, kube_backend: KubeBackend) -> None:
    """Three controllers on loopback; the operator knows every address (as the StatefulSet's pods)."""
    from integration.ha_harness import HACluster
    from spur.rpc.proto import spur_pb2 as pb

    group = HACluster(tmp_path / "ha", size=3)
    (tmp_path / "ha").mkdir()
    with operator_env(tmp_path, kube_backend, start_controller=False) as env:
        try:
            group.start()
            leader = group.wait_leader()
            # the leader first: the operator's channels are on the controller that is killed
            others = [m.address for m in group.members if m.node_id != leader]
            env.controller_address = ",".join([group.member(leader).address, *others])
            env.start_operator(
                "--request-timeout", "3", "--keepalive-interval", "1", "--keepalive-timeout", "1"
            )
            group.wait_nodes("gpu-node-1", "gpu-node-2")
            job_id, pods = env.start_running(TRAINING_RUN)

            group.kill(leader)
            new_leader = group.wait_leader(among=[m.node_id for m in group.members if m.node_id != leader])
            assert new_leader != leader
            env.set_phase(pods, "Succeeded")
            env.wait_state("training-run", "COMPLETED", timeout=60)
            jobs = group.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs
            assert [(j.job_id, j.state) for j in jobs] == [(job_id, "COMPLETED")]
            assert env.operator.alive()
        finally:
            group.stop()


def test_a_spurjob_that_cannot_be_submitted_says_why(tmp_path: Path, kube_backend: KubeBackend) -> None:
    with operator_env(tmp_path, kube_backend) as env:
        env.start_operator()
        env.apply(spurjob("nowhere", ["#SBATCH -N 1", "true"], partition="no-such-partition"))
        env.apply(spurjob("badopt", ["#SBATCH --nodes=zero", "true"]))
        env.wait_state("nowhere", "FAILED")
        env.wait_state("badopt", "FAILED")
        assert "submission refused" in env.spurjob("nowhere")["status"]["message"]
        assert "partition" in env.spurjob("nowhere")["status"]["message"].lower()
        assert "\"zero\" is not a valid node count" in env.spurjob("badopt")["status"]["message"]
        assert "jobId" not in env.spurjob("badopt")["status"]
        assert _squeue(env) == []
