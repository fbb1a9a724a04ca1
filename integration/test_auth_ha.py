"""Three controllers (one Raft group, on loopback) and an agent in ``[auth] mode = "required"``.

Followers forward a caller's credential to the leader, controllers sign their calls to each other, and
agents register through any member with their daemon token.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.ha_harness import HACluster
from integration.harness import BIN, Proc, free_port, spurd_argv, wait_for
from integration.test_auth import KEY, _kill_jobs, _write_key
from spur.auth.tokens import mint
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode


def _root_token() -> dict[str, str]:
    return {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=3600)}"}


class _RequiredGroup(HACluster):
    """HACluster whose test calls carry root's token and whose agents read the [auth] config."""

    def call_member(
        self, node_id: int, method: str, request: Any, timeout: float = 10, metadata: dict | None = None
    ) -> Any:
        return super().call_member(node_id, method, request, timeout, {**_root_token(), **(metadata or {})})

    def start_agent(self, name: str, cpus: int = 2, memory_mb: int = 4000) -> Proc:
        port = self.agent_ports.setdefault(name, free_port())
        extra = ["-f", str(self.members[0].conf)]
        argv = spurd_argv(
            self.root, name, list(self.addresses), self.host_address, port, cpus, memory_mb, extra
        )
        proc = Proc(argv, self.root / f"spurd-{name}.log", self.env).start()
        self.agents[name] = proc
        return proc


@pytest.fixture
def group(tmp_path: Path) -> Iterator[_RequiredGroup]:
    conf_extra = (
        f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(tmp_path / "jwt.key")}"\n'
        f'broker_socket = "{tmp_path / "auth.sock"}"\n'
    )
    g = _RequiredGroup(tmp_path, size=3, conf_extra=conf_extra)
    try:
        g.start()
        yield g
    finally:
        g.stop()
        _kill_jobs(g)  # type: ignore[arg-type]


def test_followers_forward_credentials_and_controllers_sign_their_calls(
    group: _RequiredGroup, tmp_path: Path
):
    leader = group.wait_leader()
    follower = next(m.node_id for m in group.members if m.node_id != leader)
    group.start_agent("n1")
    group.wait_nodes("n1")

    # Every member sees the others through signed peer calls.
    wait_for(
        lambda: all(c.healthy for c in group.call_member(follower, "GetControllers", pb.Empty()).controllers),
        what="every controller to answer its peers",
    )
    # A follower forwards the caller's token; without one the follower itself refuses.
    spec = pb.JobSpec(
        script="#!/bin/sh\necho forwarded\n", work_dir=str(tmp_path), name="fwd", stdout_pattern="out-%j.txt"
    )
    job_id = group.call_member(follower, "SubmitJob", pb.SubmitJobRequest(spec=spec)).job_id
    with pytest.raises(RpcError) as refused:
        group.call_member(
            follower, "SubmitJob", pb.SubmitJobRequest(spec=spec), metadata={"authorization": "Bearer x.y.z"}
        )
    assert refused.value.code is StatusCode.UNAUTHENTICATED

    def state() -> str:
        jobs = group.call_member(leader, "GetJobs", pb.GetJobsRequest(job_ids=[job_id])).jobs
        return jobs[0].state if jobs else ""

    wait_for(lambda: state() == "COMPLETED", timeout=30, what=f"job {job_id} to complete")
    assert (tmp_path / f"out-{job_id}.txt").read_text() == "forwarded\n"

    # The CLI with every controller address and a token, as a user on another host would use it.
    env = {**group.env, "SLURM_JWT": _root_token()["authorization"].split()[1]}
    out = subprocess.run(
        [str(BIN / "squeue"), "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
