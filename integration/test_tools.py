"""Third-party Slurm clients, unmodified, against real spurctld/spurd processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for


@pytest.fixture
def tool_env(cluster: Cluster, monkeypatch):
    """Put Spur's sbatch/squeue/... first on PATH and point them at the test controller."""
    monkeypatch.setenv("PATH", f"{BIN}:{os.environ.get('PATH', '')}")
    monkeypatch.setenv("SPUR_CONTROLLER", cluster.address)
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    return cluster


def add(a: int, b: int) -> int:
    return a + b


def test_submitit_runs_a_function_and_returns_its_result(tool_env: Cluster, tmp_path: Path):
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(timeout_min=5, slurm_partition="default", mem_gb=1, cpus_per_task=1)
    job = executor.submit(add, 2, 40)
    wait_for(job.done, timeout=120, interval=0.5, what="the submitit job to finish")
    assert job.result() == 42
    wait_for(lambda: job.get_info(mode="force").get("State") == "COMPLETED", what="sacct to say COMPLETED")


def test_dask_jobqueue_scales_to_two_workers_and_computes(tool_env: Cluster, tmp_path: Path):
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    from distributed import Client

    with (
        dask_jobqueue.SLURMCluster(
            cores=1,
            memory="1GB",
            processes=1,
            walltime="00:10:00",
            queue="default",
            log_directory=str(tmp_path / "dask-logs"),
            local_directory=str(tmp_path / "dask-local"),
            scheduler_options={"host": "127.0.0.1"},
            worker_extra_args=["--host", "127.0.0.1"],
        ) as slurm_cluster,
        Client(slurm_cluster) as client,
    ):
        slurm_cluster.scale(jobs=2)
        client.wait_for_workers(2, timeout=120)
        futures = client.map(lambda x: x * x, range(10))
        assert client.submit(sum, futures).result(timeout=60) == 285
        assert len(client.scheduler_info()["workers"]) == 2
