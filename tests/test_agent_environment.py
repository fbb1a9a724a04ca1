"""Job environment and launch-spec resolution (pure logic)."""

from __future__ import annotations

import pytest

from spur.agent.environment import (
    GpuOrdinal,
    build_job_environment,
    compress_counts,
    task_environment,
    twin_name,
)
from spur.agent.launchspec import LaunchError, UserInfo, build_launch_spec, resolve_user
from spur.rpc.proto import spur_pb2 as pb


def _job(**spec_fields: object) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=42,
        user="alice",
        uid=1000,
        gid=1000,
        partition="gpu",
        time_limit_secs=600,
        spec=pb.JobSpec(name="train", work_dir="/home/alice/run", **spec_fields),
        allocation=[
            pb.NodeAllocation(node="n1", cpus=8, tasks=2, gpus=[1, 3]),
            pb.NodeAllocation(node="n2", cpus=8, tasks=2),
            pb.NodeAllocation(node="n3", cpus=4, tasks=1),
        ],
    )


ORDINALS = {
    0: GpuOrdinal("nvidia", 0),
    1: GpuOrdinal("nvidia", 1),
    2: GpuOrdinal("amd", 0),
    3: GpuOrdinal("amd", 1),
}


def _env(job: pb.JobInfo | None = None, node: str = "n1") -> dict[str, str]:
    return build_job_environment(
        job or _job(), node=node, cluster_name="lab", nodelist="n[1-3]", gpu_ordinals=ORDINALS
    )


def test_compress_counts_matches_slurm_form() -> None:
    assert compress_counts([2, 2, 2, 1]) == "2(x3),1"
    assert compress_counts([1]) == "1"
    assert compress_counts([4, 1, 4]) == "4,1,4"
    assert compress_counts([]) == ""


def test_slurm_variables_and_spur_twins() -> None:
    env = _env(_job(num_tasks=5))
    expected = {
        "SLURM_JOB_ID": "42",
        "SLURM_JOBID": "42",
        "SLURM_JOB_NAME": "train",
        "SLURM_JOB_NODELIST": "n[1-3]",
        "SLURM_NODELIST": "n[1-3]",
        "SLURM_JOB_NUM_NODES": "3",
        "SLURM_NNODES": "3",
        "SLURM_NTASKS": "5",
        "SLURM_NPROCS": "5",
        "SLURM_TASKS_PER_NODE": "2(x2),1",
        "SLURM_CPUS_ON_NODE": "8",
        "SLURM_NODEID": "0",
        "SLURM_SUBMIT_DIR": "/home/alice/run",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_UID": "1000",
        "SLURM_JOB_GID": "1000",
        "SLURM_CLUSTER_NAME": "lab",
        "SLURMD_NODENAME": "n1",
    }
    for key, value in expected.items():
        assert env[key] == value, key
        assert env[twin_name(key)] == value, twin_name(key)
    assert env["SPUR_NODELIST"] == "n[1-3]"
    assert env["SPUR_NODENAME"] == "n1"
    assert "SLURM_CPUS_PER_TASK" not in env
    assert "SLURM_MEM_PER_NODE" not in env


def test_node_index_and_optional_variables() -> None:
    env = _env(_job(cpus_per_task=4, mem_per_node_mb=2048), node="n3")
    assert env["SLURM_NODEID"] == "2"
    assert env["SLURM_CPUS_ON_NODE"] == "4"
    assert env["SLURM_CPUS_PER_TASK"] == "4"
    assert env["SPUR_CPUS_PER_TASK"] == "4"
    assert env["SLURM_MEM_PER_NODE"] == "2048"


def test_gpu_variables_use_vendor_ordinals() -> None:
    env = _env()
    assert env["SLURM_JOB_GPUS"] == "1,3"
    assert env["SLURM_GPUS_ON_NODE"] == "2"
    assert env["CUDA_VISIBLE_DEVICES"] == "1"  # node GPU 1 is NVIDIA ordinal 1
    assert env["ROCR_VISIBLE_DEVICES"] == "1"  # node GPU 3 is AMD ordinal 1
    assert env["GPU_DEVICE_ORDINAL"] == "1,1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_submit_host_gpu_variables_do_not_leak() -> None:
    job = _job(environment={"CUDA_VISIBLE_DEVICES": "7", "HOME": "/h", "HOSTNAME": "login1", "X": "y"})
    env = _env(job, node="n2")  # n2 has no GPUs allocated
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert "SLURM_JOB_GPUS" not in env
    assert env["X"] == "y"
    assert env["HOME"] == "/h"
    assert env["SLURM_SUBMIT_HOST"] == "login1"


def test_submitter_cannot_override_slurm_variables() -> None:
    env = _env(_job(environment={"SLURM_JOB_ID": "1", "SLURM_NODEID": "9"}))
    assert env["SLURM_JOB_ID"] == "42"
    assert env["SLURM_NODEID"] == "0"


def test_defaults_for_empty_environment() -> None:
    env = build_job_environment(
        _job(), node="n1", cluster_name="c", nodelist="n[1-3]", home="/home/alice", shell="/bin/bash"
    )
    assert env["PATH"]
    assert env["HOME"] == "/home/alice"
    assert env["USER"] == "alice"
    assert env["SHELL"] == "/bin/bash"


def test_node_outside_allocation_is_an_error() -> None:
    with pytest.raises(ValueError, match="n9"):
        _env(node="n9")


def test_task_environment_sets_ranks() -> None:
    env = task_environment({"A": "1"}, procid=5, localid=1)
    assert env == {
        "A": "1",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SPUR_PROCID": "5",
        "SPUR_LOCALID": "1",
    }


# ---------------------------------------------------------------- launch spec

ALICE = UserInfo("alice", 1000, 1000, "/home/alice", "/bin/bash", (1000, 27))


def _request(job: pb.JobInfo, node: str = "n1", first_task: int = 0) -> pb.LaunchJobRequest:
    return pb.LaunchJobRequest(job=job, node=node, first_task=first_task, batch=True)


def _spec(job: pb.JobInfo, node: str = "n1", euid: int = 0, first_task: int = 0):
    return build_launch_spec(
        _request(job, node, first_task),
        node=node,
        user=ALICE,
        cluster_name="lab",
        euid=euid,
        received_at=123.0,
    )


def test_batch_output_paths_default_and_patterns() -> None:
    spec = _spec(_job(script="#!/bin/sh\n"))
    assert spec.stdout_path == "/home/alice/run/slurm-42.out"
    assert spec.stderr_path == ""
    assert spec.stdin_path == "/dev/null"
    spec = _spec(_job(script="#!/bin/sh\n", stdout_pattern="logs/%x-%j.out", stderr_pattern="/tmp/%u.err"))
    assert spec.stdout_path == "/home/alice/run/logs/train-42.out"
    assert spec.stderr_path == "/tmp/alice.err"


def test_same_stdout_and_stderr_pattern_share_a_file() -> None:
    spec = _spec(_job(script="#!/bin/sh\n", stdout_pattern="o-%j", stderr_pattern="o-%j"))
    assert spec.stderr_path == ""


def test_interactive_spec_uses_node_tasks_and_first_rank() -> None:
    spec = _spec(_job(interactive=True, argv=["hostname"]), node="n2", first_task=2)
    assert spec.interactive
    assert spec.ntasks == 2
    assert list(spec.ranks) == [2, 3]
    assert spec.stdout_path == ""


def test_spec_resolution_fields() -> None:
    spec = _spec(_job(script="#!/bin/sh\n", environment={"SLURM_UMASK": "0077"}))
    assert spec.start_time == 123.0  # job.start_time unset -> received time
    assert spec.time_limit_secs == 600
    assert spec.umask == 0o077
    assert spec.drop_privileges
    assert spec.groups == [1000, 27]
    assert not _spec(_job(script="#!/bin/sh\n"), euid=1000).drop_privileges


@pytest.mark.parametrize(
    ("job", "node", "message"),
    [
        (_job(script="#!/bin/sh\n"), "n9", "not part of the allocation"),
        (_job(), "n1", "has no script"),
        (_job(interactive=True), "n1", "no command"),
        (_job(script="#!/bin/sh\n", environment={"SLURM_UMASK": "rw"}), "n1", "SLURM_UMASK"),
    ],
)
def test_bad_launch_requests(job: pb.JobInfo, node: str, message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        _spec(job, node)


def test_non_root_agent_refuses_other_users() -> None:
    with pytest.raises(LaunchError, match="not root, so it can only run that user's jobs"):
        resolve_user(0, "root", euid=12345, node="n1")


def test_unknown_uid_is_refused() -> None:
    with pytest.raises(LaunchError, match="user id 3999999 .* does not exist on node n1"):
        resolve_user(3999999, "ghost", euid=0, node="n1")


# ---------------------------------------------------------------- arrays and steps


def test_array_task_step_from_the_array_spec() -> None:
    from spur.agent.environment import array_task_step

    assert array_task_step("0-15:4%2") == 4
    assert array_task_step("1,3,5") == 1  # Slurm 22.05: only a stepped range has a step
    assert array_task_step("1,2,5") == 1
    assert array_task_step("7") == 1


def test_step_environment_describes_the_step() -> None:
    from spur.agent.environment import build_step_environment

    step = pb.StepInfo(
        step_id=2,
        spec=pb.StepSpec(argv=["x"], cpus_per_task=2, environment={"FROM_SRUN": "1", "SLURM_STEP_ID": "9"}),
        allocation=[pb.NodeAllocation(node="n2", cpus=4, tasks=3, gpus=[0])],
    )
    env = build_step_environment(
        _job(),
        step,
        node="n2",
        cluster_name="lab",
        nodelist="n[1-3]",
        step_nodelist="n2",
        gpu_ordinals=ORDINALS,
    )
    assert env["FROM_SRUN"] == "1"
    assert (env["SLURM_STEP_ID"], env["SLURM_NODEID"], env["SLURM_NTASKS"], env["SLURM_NNODES"]) == (
        "2",
        "0",
        "3",
        "1",
    )
    assert (env["SLURM_NODELIST"], env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"]) == (
        "n2",
        "n[1-3]",
        "3",
    )
    assert env["SLURM_CPUS_PER_TASK"] == "2"
    assert env["CUDA_VISIBLE_DEVICES"] == "0"  # the step's GPU on this node
    with pytest.raises(ValueError, match="step 42.2"):
        build_step_environment(
            _job(), step, node="n1", cluster_name="lab", nodelist="n[1-3]", step_nodelist="n2"
        )


def test_task_count_memory_and_topology_variables_follow_the_request() -> None:
    """As slurmd (checked against Slurm 22.05 by integration/conformance): no task count when none was
    asked, SLURM_NTASKS_PER_NODE and SLURM_MEM_PER_CPU when given, the batch task's global id and the
    flat topology address."""
    plain = _env()
    assert "SLURM_NTASKS" not in plain and "SLURM_NPROCS" not in plain
    assert "SLURM_MEM_PER_CPU" not in plain and "SLURM_NTASKS_PER_NODE" not in plain
    assert plain["SLURM_GTIDS"] == "0"
    assert plain["SLURM_TOPOLOGY_ADDR"] == "n1" and plain["SLURM_TOPOLOGY_ADDR_PATTERN"] == "node"
    assert plain["SLURM_NODE_ALIASES"] == "(null)"
    per_node = _env(_job(ntasks_per_node=2, num_nodes=3, mem_per_cpu_mb=100))
    assert per_node["SLURM_NTASKS"] == per_node["SLURM_NPROCS"] == "5"
    assert per_node["SLURM_NTASKS_PER_NODE"] == "2"
    assert per_node["SLURM_MEM_PER_CPU"] == "100"


# ---------------------------------------------------------------- GPUs per task

SYSFS = __import__("pathlib").Path(__file__).parent / "fixtures" / "sysfs"


def _fixture_ordinals(name: str) -> dict[int, GpuOrdinal]:
    from spur.agent.discovery import discover_gpus
    from spur.agent.executor import gpu_ordinals_from

    return gpu_ordinals_from(discover_gpus(SYSFS / name))


def _gpu_job(gpus: list[int], tasks: int, gpus_per_task: int) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=9,
        user="alice",
        uid=1000,
        gid=1000,
        spec=pb.JobSpec(argv=["./train"], interactive=True, work_dir="/tmp", gpus_per_task=gpus_per_task),
        allocation=[pb.NodeAllocation(node="n1", cpus=8, tasks=tasks, gpus=gpus)],
    )


def _task_envs(job: pb.JobInfo, ordinals: dict[int, GpuOrdinal]) -> list[dict[str, str]]:
    spec = build_launch_spec(
        pb.LaunchJobRequest(job=job, node="n1"),
        node="n1",
        user=ALICE,
        cluster_name="lab",
        euid=1000,
        gpu_ordinals=ordinals,
        received_at=1.0,
    )
    return [
        task_environment(
            spec.environment, procid=i, localid=i, gpus=spec.task_gpus[i] if spec.task_gpus else None
        )
        for i in range(spec.ntasks)
    ]


def _visible(env: dict[str, str]) -> tuple[str | None, str | None]:
    return env.get("CUDA_VISIBLE_DEVICES"), env.get("ROCR_VISIBLE_DEVICES")


def test_gpus_per_task_binds_each_task_to_its_own_gpus_on_the_a100_fixture() -> None:
    envs = _task_envs(_gpu_job([0, 1, 2, 3], tasks=2, gpus_per_task=2), _fixture_ordinals("nvidia-4xa100"))
    assert [_visible(e) for e in envs] == [("0,1", None), ("2,3", None)]
    assert [e["GPU_DEVICE_ORDINAL"] for e in envs] == ["0,1", "2,3"]
    assert all(e["SLURM_JOB_GPUS"] == "0,1,2,3" and e["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" for e in envs)


def test_gpus_per_task_on_the_mixed_fixture_gives_each_vendor_s_task_only_its_own_variable() -> None:
    envs = _task_envs(_gpu_job([0, 1], tasks=2, gpus_per_task=1), _fixture_ordinals("mixed"))
    # Node GPU 0 is the H100 (CUDA ordinal 0), node GPU 1 the MI300X (ROCm ordinal 0).
    assert [_visible(e) for e in envs] == [("0", None), (None, "0")]
    assert "CUDA_DEVICE_ORDER" not in envs[1]


def test_gres_gpu_without_gpus_per_task_lets_every_task_see_the_node_s_gpus() -> None:
    envs = _task_envs(_gpu_job([1, 2], tasks=2, gpus_per_task=0), _fixture_ordinals("amd-mi250x"))
    assert [_visible(e) for e in envs] == [(None, "1,2"), (None, "1,2")]


def test_a_step_binds_its_tasks_within_the_node_s_gpus() -> None:
    from spur.agent.launchspec import build_step_launch_spec

    job = _gpu_job([0, 1, 2, 3], tasks=4, gpus_per_task=1)
    job.state = "RUNNING"
    step = pb.StepInfo(
        step_id=0,
        spec=pb.StepSpec(argv=["./train"], num_tasks=2),
        allocation=[pb.NodeAllocation(node="n1", cpus=2, tasks=2, gpus=[2, 3])],
    )
    spec = build_step_launch_spec(
        pb.LaunchStepRequest(job=job, step=step, node="n1", first_task=0),
        node="n1",
        user=ALICE,
        cluster_name="lab",
        euid=1000,
        gpu_ordinals=_fixture_ordinals("nvidia-4xa100"),
        received_at=1.0,
    )
    assert [g["CUDA_VISIBLE_DEVICES"] for g in spec.task_gpus] == ["2", "3"]
