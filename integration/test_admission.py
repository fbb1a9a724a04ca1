"""Node admission ([admission] mode = "token") and cluster identity, with real spurctld + spurd processes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for

TOKEN_MODE = '[admission]\nmode = "token"\n'


@pytest.fixture
def token_cluster(tmp_path):
    c = Cluster(tmp_path, conf_extra=TOKEN_MODE)
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def create_token(cluster: Cluster, *args: str) -> str:
    out = cluster.cli("spur", "token", "create", *args)
    token = out.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{6}\.[0-9a-f]{32,}", token), out.stdout
    assert "shown only now" in out.stderr
    return token


def token_row(cluster: Cluster, token_id: str) -> list[str]:
    table = cluster.cli("spur", "token", "list").stdout.splitlines()
    assert table[0].split()[:5] == ["ID", "STATE", "USES_LEFT", "USED", "EXPIRES"]
    return next(line.split() for line in table[1:] if line.startswith(token_id))


def refusals(proc_log: str) -> int:
    return proc_log.count("registering node")


def raw_call(cluster: Cluster, method: str, request, metadata: dict[str, str]):
    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.stub import controller_stub

    async def run():
        async with open_channel(cluster.address) as ch:
            return await getattr(controller_stub(ch), method)(request, timeout=10, metadata=metadata)

    return trio.run(run)


def batch_reports(cluster: Cluster, reports: list, metadata: dict[str, str]):
    import trio

    from spur.rpc.batching import CONTROLLER_BATCH
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import batch_pb2
    from spur.rpc.stub import Stub

    request = batch_pb2.JobStatusReports(reports=[r.SerializeToString() for r in reports])

    async def run():
        async with open_channel(cluster.address) as ch:
            return await Stub(ch, CONTROLLER_BATCH).ReportJobStatuses(request, timeout=10, metadata=metadata)

    return trio.run(run)


def test_node_registers_only_with_a_valid_join_token(token_cluster: Cluster, tmp_path: Path):
    c = token_cluster
    # no token: refused, once per attempt, on both sides; the node is not registered
    c.start_agent("bare")
    wait_for(lambda: refusals(c.agents["bare"].log()) >= 2, what="two refused registration attempts")
    agent_log = c.agents["bare"].log()
    assert "node bare refused: it presented no join token" in agent_log
    assert "spur token create" in agent_log
    assert "refused node bare" in c.controller.log()
    assert c.agents["bare"].alive()  # it keeps retrying, it does not crash
    assert [n.name for n in c.nodes()] == []

    # a one-use token admits one node; the secret is never logged
    token = create_token(c, "--ttl", "1h", "--uses", "1")
    token_id, secret = token.split(".")
    c.start_agent("good", extra=["--join-token", token])
    c.wait_nodes("good")
    credential = tmp_path / "agent-good" / "clusters"
    # the controller records the node before the agent has stored the credential it was sent
    cred_files = wait_for(lambda: list(credential.glob("*/node_credential")), what="the stored credential")
    assert len(cred_files) == 1 and cred_files[0].stat().st_mode & 0o777 == 0o600
    row = token_row(c, token_id)
    assert row[1:4] == ["exhausted", "0", "1"]
    for log in (c.controller.log(), c.agents["good"].log()):
        assert secret not in log and cred_files[0].read_text().strip() not in log

    # heartbeats and job reports carry the node credential: a job runs to completion
    out = c.cli("sbatch", "--parsable", "--wrap", "echo admitted", cwd=tmp_path)
    job_id = int(out.stdout.strip())
    c.wait_job(job_id, "COMPLETED")
    assert (tmp_path / f"slurm-{job_id}.out").read_text() == "admitted\n"

    # a restarted agent re-registers with its credential: no token use is needed (the token is used up)
    c.agents["good"].kill()
    c.start_agent("good", extra=["--join-token", token])
    wait_for(lambda: c.agents["good"].log().count("registered node good") >= 2, what="re-registration")
    assert token_row(c, token_id)[1:4] == ["exhausted", "0", "1"]

    # the used-up token admits no other node
    c.start_agent("second", extra=["--join-token", token])
    wait_for(lambda: "join token " + token_id + " has no uses left" in c.agents["second"].log())
    assert "second" not in {n.name for n in c.nodes()}


def test_revoked_and_expired_tokens_are_refused(token_cluster: Cluster):
    c = token_cluster
    revoked = create_token(c)
    revoked_id = revoked.split(".")[0]
    assert c.cli("spur", "token", "revoke", revoked_id).stdout == f"join token {revoked_id} revoked\n"
    assert token_row(c, revoked_id)[1] == "revoked"
    c.start_agent("r1", extra=["--join-token", revoked])
    wait_for(lambda: f"join token {revoked_id} was revoked" in c.agents["r1"].log(), what="revoked refusal")
    assert f"join token {revoked_id} was revoked" in c.controller.log()

    expiring = create_token(c, "--ttl", "1s")
    expiring_id = expiring.split(".")[0]
    wait_for(lambda: token_row(c, expiring_id)[1] == "expired", timeout=10, what="the token to expire")
    c.start_agent("e1", extra=["--join-token", expiring])
    wait_for(lambda: f"join token {expiring_id} has expired" in c.agents["e1"].log(), what="expired refusal")
    assert {n.name for n in c.nodes()} == set()

    bad = c.cli("spur", "token", "revoke", "ffffff", check=False)
    assert bad.returncode != 0 and "join token ffffff does not exist" in bad.stderr
    bad = c.cli("spur", "token", "create", "--ttl", "soon", check=False)
    assert bad.returncode == 2 and "invalid duration 'soon'" in bad.stderr


def test_heartbeats_from_unknown_or_uncredentialed_nodes_are_refused(token_cluster: Cluster):
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError, StatusCode

    c = token_cluster
    for metadata in ({}, {"x-spur-node-credential": "f" * 64}):
        with pytest.raises(RpcError) as exc:
            raw_call(c, "Heartbeat", pb.HeartbeatRequest(name="ghost"), metadata)
        assert exc.value.code is StatusCode.PERMISSION_DENIED
        assert "heartbeat from node ghost refused" in exc.value.message
        with pytest.raises(RpcError) as exc:
            raw_call(c, "ReportJobStatus", pb.JobStatusReport(job_id=1, node="ghost"), metadata)
        assert exc.value.code is StatusCode.PERMISSION_DENIED
        # the same reports in one batch call: each refused on its own, nothing recorded
        out = batch_reports(c, [pb.JobStatusReport(job_id=j, node="ghost") for j in (1, 2)], metadata)
        assert [o.code for o in out.outcomes] == [StatusCode.PERMISSION_DENIED.value] * 2
        assert all("job report from node ghost refused" in o.message for o in out.outcomes)
    assert c.controller.alive()


def test_token_commands_need_an_administrator(token_cluster: Cluster):
    import trio

    from spur.auth.identity import Identity, identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import admission_pb2 as apb
    from spur.rpc.status import RpcError, StatusCode
    from spur.rpc.stub import Stub

    user = identity_metadata(Identity(1000, 1000, "alice", "alice"))

    async def call(method: str, request):
        async with open_channel(token_cluster.address) as ch:
            stub = Stub(ch, apb.DESCRIPTOR.services_by_name["Admission"])
            return await getattr(stub, method)(request, timeout=10, metadata=user)

    for method, request in (
        ("CreateToken", apb.CreateTokenRequest(ttl_secs=60)),
        ("ListTokens", apb.ListTokensRequest()),
        ("RevokeToken", apb.RevokeTokenRequest(id="0a1b2c")),
    ):
        with pytest.raises(RpcError) as exc:
            trio.run(call, method, request)
        assert exc.value.code is StatusCode.PERMISSION_DENIED
        assert "Access/permission denied" in exc.value.message
    assert token_cluster.cli("spur", "token", "list").stdout.splitlines()[1:] == []


def test_spur_token_needs_a_command():
    import subprocess

    out = subprocess.run([str(BIN / "spur"), "token", "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown command 'frobnicate'" in out.stderr


# ---------------------------------------------------------------- cluster identity


HELLO = "#!/bin/bash\n#SBATCH -o hello-%j.out\necho hello from job $SLURM_JOB_ID\n"


def test_readme_tour_twice_with_a_new_controller_state_and_the_same_agent_state(tmp_path: Path):
    agent_state = tmp_path / "agent-state"
    ids = []
    for run in ("first", "second"):
        root = tmp_path / run
        root.mkdir()
        c = Cluster(root)
        try:
            c.start_controller()
            c.start_agent("node1", extra=["--state-dir", str(agent_state)])
            c.wait_nodes("node1")
            (root / "hello.sh").write_text(HELLO)
            assert c.cli("sbatch", "hello.sh", cwd=root).stdout == "Submitted batch job 1\n"
            job = c.wait_job(1, "COMPLETED", "FAILED", timeout=30)
            assert job.state == "COMPLETED"
            text = wait_for(lambda root=root: (root / "hello-1.out").read_text(), what="output file")
            assert text == "hello from job 1\n"
            config = c.cli("scontrol", "show", "config").stdout
            cluster_id = re.search(r"^ClusterId\s+= ([0-9a-f]{32})$", config, re.M)
            assert cluster_id, config
            assert (
                f"ClusterId={cluster_id.group(1)} ClusterName=itest"
                in c.cli("spur", "show", "cluster").stdout
            )
            ids.append(cluster_id.group(1))
        finally:
            c.stop()
    assert ids[0] != ids[1]
    assert (agent_state / "cluster_id").read_text().strip() == ids[1]
    assert (agent_state / "clusters" / ids[0] / "done" / "1").exists()


def test_spurd_refuses_a_join_token_file_others_can_read(tmp_path: Path):
    import subprocess

    token_file = tmp_path / "join-token"
    token_file.write_text("0a1b2c.0123456789abcdef0123456789abcdef\n")
    token_file.chmod(0o644)
    argv = [str(BIN / "spurd"), "--state-dir", str(tmp_path / "s"), "--join-token-file", str(token_file)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert f"--join-token-file {token_file} is accessible by group or other (mode 0644)" in out.stderr
    assert "chmod 600" in out.stderr and "0123456789abcdef" not in out.stderr


def test_a_launch_the_agent_ignored_is_requeued_and_runs(tmp_path: Path):
    """The agent wrongly believes it already ran job 1 (a stale tombstone): the job must not stay RUNNING."""
    c = Cluster(tmp_path)
    try:
        c.start_controller()
        c.start_agent("node1")
        c.wait_nodes("node1")
        cluster_id = c.cli("spur", "show", "cluster").stdout.split()[0].removeprefix("ClusterId=")
        done = tmp_path / "agent-node1" / "clusters" / cluster_id / "done"
        done.mkdir(parents=True, exist_ok=True)  # the agent makes it at its first job of the cluster
        (done / "1").write_text("0")
        (tmp_path / "hello.sh").write_text(HELLO)
        c.cli("sbatch", "hello.sh", cwd=tmp_path)
        job = c.wait_job(1, "COMPLETED", timeout=60)
        assert job.restarts == 1
        assert (tmp_path / "hello-1.out").read_text() == "hello from job 1\n"
        assert "node node1 is not running job 1" in c.controller.log()
        assert "its launch was lost or ignored" in c.controller.log()
    finally:
        c.stop()


def test_followers_forward_token_commands_and_registrations(tmp_path: Path):
    """Three controllers: token commands and admissions sent to a follower reach the leader's state."""
    import subprocess

    from integration.ha_harness import HACluster
    from integration.harness import Proc, free_port, spurd_argv

    ha = HACluster(tmp_path, size=3, conf_extra=TOKEN_MODE)
    try:
        ha.start()
        leader = ha.wait_leader()
        follower = next(m for m in ha.members if m.node_id != leader)
        env = {**ha.env, "SPUR_CONTROLLER": follower.address}

        def spur(*args: str) -> subprocess.CompletedProcess:
            out = subprocess.run(
                [str(BIN / "spur"), *args], env=env, capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 0, out.stderr
            return out

        token = spur("token", "create", "--uses", "1").stdout.strip()
        token_id = token.split(".")[0]
        port = free_port()
        argv = spurd_argv(
            tmp_path, "n1", [follower.address], "127.0.0.1", port, 1, 1000, ["--join-token", token]
        )
        ha.agents["n1"] = Proc(argv, tmp_path / "spurd-n1.log", ha.env).start()
        ha.wait_nodes("n1")
        rows = spur("token", "list").stdout.splitlines()
        assert rows[1].split()[:4] == [token_id, "exhausted", "0", "1"]
        # every member answers `show cluster` from its own replicated state: one id for the group
        ids = set()
        for m in ha.members:
            env["SPUR_CONTROLLER"] = m.address
            ids.add(spur("show", "cluster").stdout.split()[0])
        assert len(ids) == 1 and re.fullmatch(r"ClusterId=[0-9a-f]{32}", ids.pop())
    finally:
        ha.stop()
