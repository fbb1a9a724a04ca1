"""Bounded admission: a full controller refuses submissions with "Resource temporarily unavailable"
(RESOURCE_EXHAUSTED), sbatch backs off and retries as Slurm's does, and nothing is submitted twice."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

pytestmark = pytest.mark.integration


@pytest.fixture
def full(tmp_path: Path):
    c = Cluster(tmp_path, controller_extra="max_job_count = 1\n")  # holds at most one unfinished job
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def test_a_full_controller_refuses_and_sbatch_retries_until_admitted(full: Cluster) -> None:
    first = full.cli("sbatch", "--parsable", "--wrap", "true").stdout.strip()
    assert first == "1"

    # The API answer: RESOURCE_EXHAUSTED with Slurm's EAGAIN text; nothing was created.
    with pytest.raises(RpcError) as refused:
        full.submit_spec(script="#!/bin/sh\ntrue\n", work_dir=str(full.root))
    assert refused.value.code is StatusCode.RESOURCE_EXHAUSTED
    assert "Resource temporarily unavailable" in refused.value.message
    assert sorted(full.jobs()) == [1]

    # sbatch backs off and retries (delays scaled down) until the controller has room again.
    err = full.root / "sbatch.err"
    env = dict(full.env, SPUR_BUSY_RETRY_SCALE="0.05")
    with open(err, "w") as errf:
        proc = subprocess.Popen(
            [str(BIN / "sbatch"), "--parsable", "--wrap", "true"],
            cwd=full.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errf,
            text=True,
        )
        try:
            wait_for(
                lambda: "Slurm temporarily unable to accept job, sleeping and retrying" in err.read_text(),
                timeout=20,
                what="sbatch to report that it is backing off",
            )
            assert proc.poll() is None  # still retrying
            full.call("CancelJob", pb.CancelJobRequest(job_id=1))
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err.read_text()
    assert out.strip() == "2"
    assert sorted(full.jobs()) == [1, 2]  # admitted once, never twice


def test_sbatch_gives_up_after_its_retries_with_slurms_message(full: Cluster) -> None:
    full.cli("sbatch", "--wrap", "true")
    env = dict(full.env, SPUR_BUSY_RETRY_SCALE="0.01")
    proc = subprocess.run(
        [str(BIN / "sbatch"), "--wrap", "true"],
        cwd=full.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines.count("sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying") == 15
    assert lines[-1].startswith(
        "sbatch: error: Batch job submission failed: Resource temporarily unavailable"
    ), lines[-1]
    assert sorted(full.jobs()) == [1]
