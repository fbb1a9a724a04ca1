"""Hostile tokens (issue 20, the token rows): captured daemon credentials, over-long and future
tokens, revoked tokens, revoked join tokens and a forged group header, against a real spurctld and
spurd in ``[auth] mode = "required"`` with ``[admission] mode = "token"``, attacked from a real
unprivileged user (useradd, runuser). Every attack is refused with a clear error, the cluster keeps
serving and no state changed. Needs root (useradd, runuser, a root spurd)."""

from __future__ import annotations

import base64
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.as_user import PUBLIC_PYTHON, ROOT, SITE_PACKAGES, needs_users, run_cli_as
from integration.harness import BIN, Cluster, free_port, wait_for
from integration.test_auth import KEY, _kill_jobs, _write_key
from spur.auth.tokens import mint
from spur.rpc.proto import spur_pb2 as pb

TEN_YEARS = 10 * 365 * 86400

pytestmark = needs_users


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, Any]]:
    """Two unprivileged users; ``a`` is also in a supplementary group."""
    suffix = secrets.token_hex(3)
    names = {"a": f"spsca{suffix}", "b": f"spscb{suffix}"}
    extra = f"spscg{suffix}"
    created: list[str] = []
    subprocess.run(["groupadd", extra], check=True, capture_output=True)
    try:
        for key, name in names.items():
            groups = ["-G", extra] if key == "a" else []
            subprocess.run(["useradd", "-M", "-s", "/bin/sh", *groups, name], check=True, capture_output=True)
            created.append(name)
        found: dict[str, Any] = {k: pwd.getpwnam(v) for k, v in names.items()}
        found["extra_gid"] = grp.getgrnam(extra).gr_gid
        yield found
    finally:
        for name in created:
            subprocess.run(["userdel", "-f", name], capture_output=True)
        subprocess.run(["groupdel", extra], capture_output=True)


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="spur-hostile-tokens-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _root_md() -> dict[str, str]:
    return {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=3600, gid=0)}"}


@pytest.fixture(scope="module")
def cluster(shared: Path) -> Iterator[Cluster]:
    root = shared / "cluster"
    root.mkdir(mode=0o755)
    conf_extra = (
        f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(root / "jwt.key")}"\n'
        f'broker_socket = "{shared / "auth.sock"}"\nmax_token_lifespan = 7200\ntoken_ttl_secs = 3600\n'
        '[admission]\nmode = "token"\n'
    )
    c = Cluster(root, conf_extra=conf_extra, agent_conf=True)
    c.metadata = _root_md()
    c.start_controller()
    c.join_tokens = {"n1": _create_join_token(c)}  # type: ignore[attr-defined]
    c.start_agent("n1", cpus=4, extra=["--join-token", c.join_tokens["n1"]])  # type: ignore[attr-defined]
    c.wait_nodes("n1")
    conf = shared / "spur.conf"
    shutil.copy(root / "spur.conf", conf)
    conf.chmod(0o644)
    try:
        yield c
    finally:
        c.stop()
        _kill_jobs(c)


# ---------------------------------------------------------------------------- helpers


def _call(
    target: str, module: str, service: str, method: str, request: dict, md: dict, user: str | None = None
):
    """One call, as ``user`` (runuser) or as this process; returns (code name, message, response)."""
    spec = json.dumps(
        {
            "target": target,
            "module": module,
            "service": service,
            "method": method,
            "request": request,
            "metadata": md,
        }
    )
    env = {"PYTHONPATH": f"{ROOT}:{SITE_PACKAGES}", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    argv = [PUBLIC_PYTHON or sys.executable, "-m", "integration.hostile_call", spec]
    if user is not None:
        argv = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), *argv]
    outer = {**env, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # runuser lives in sbin
    out = subprocess.run(argv, cwd="/", env=outer, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    return answer["code"], answer["message"], answer["response"]


def _ctl(
    c: Cluster, method: str, request: dict, md: dict, user: str | None = None, service: str = "Controller"
):
    module = {"Controller": "spur_pb2", "Auth": "auth_pb2", "Admission": "admission_pb2"}[service]
    return _call(c.address, module, service, method, request, md, user)


def _agent(c: Cluster, name: str, method: str, request: dict, md: dict, user: str | None = None):
    return _call(f"127.0.0.1:{c.agent_ports[name]}", "spur_pb2", "Agent", method, request, md, user)


def _create_join_token(c: Cluster, uses: int | None = None) -> str:
    request: dict[str, Any] = {"ttlSecs": 3600}
    if uses is not None:
        request["uses"] = uses
    code, message, response = _ctl(c, "CreateToken", request, _root_md(), service="Admission")
    assert code == "OK", message
    return response["token"]


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _cli(c: Cluster, shared: Path, user: str, *args: str, env: dict[str, str] | None = None):
    """A Spur CLI command run as ``user`` (its credential from the broker unless SLURM_JWT is given)."""
    base = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "SPUR_CONTROLLER": c.address,
        "SPUR_CONF": str(shared / "spur.conf"),
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    return run_cli_as(user, base, (*args,), shared)


def _user_token(c: Cluster, shared: Path, user: str) -> tuple[str, str]:
    """``spur token`` as ``user``: (token, token id printed on stderr)."""
    out = _cli(c, shared, user, "spur", "token")
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip().split("=", 1)[1]
    assert f"token id {_claims(token)['jti']}" in out.stderr
    return token, _claims(token)["jti"]


def _capture_controller_token(c: Cluster, shared: Path) -> str:
    """Capture the credential spurctld sends an agent: register a fake node whose agent records it,
    and give the controller a job to launch there."""
    port = free_port()
    out = shared / "captured.txt"
    fake = subprocess.Popen(
        [sys.executable, "-m", "integration.capture_agent", str(port), str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        agent_token = mint(KEY, "spurd", 0, now=time.time(), ttl_secs=300, audience="agent")
        register = {
            "name": "cap",
            "address": "127.0.0.1",
            "port": port,
            "cpus": 1,
            "memoryMb": "1000",
            "joinToken": _create_join_token(c, uses=1),
        }
        wait_for(
            lambda: _ctl(c, "RegisterNode", register, _bearer(agent_token))[0] == "OK", timeout=20, what="cap"
        )
        job = c.submit_spec(script="#!/bin/sh\ntrue\n", nodelist=["cap"], name="capture")
        wait_for(
            lambda: out.exists() and "Bearer " in out.read_text(), timeout=30, what="a captured credential"
        )
        c.call("CancelJob", pb.CancelJobRequest(job_id=job))
    finally:
        os.killpg(fake.pid, signal.SIGKILL)
        fake.wait(timeout=10)
    c.call("UpdateNode", pb.UpdateNodeRequest(nodes="cap", state="DRAIN", reason="capture done"))
    line = next(x for x in out.read_text().splitlines() if "Bearer " in x)
    return line.split("Bearer ", 1)[1].strip()


def _job_ids(c: Cluster) -> set[int]:
    return {j.job_id for j in c.call("GetJobs", pb.GetJobsRequest(include_finished=True)).jobs}


# ---------------------------------------------------------------------------- the attacks


def test_a_captured_controller_token_replayed_by_a_user_is_no_admin(
    cluster: Cluster, shared: Path, users
) -> None:
    c = cluster
    a = users["a"].pw_name
    victim = c.submit_spec(script="#!/bin/sh\nexec sleep 300\n", nodelist=["n1"], name="victim")
    c.wait_job(victim, "RUNNING", timeout=60)
    captured = _capture_controller_token(c, shared)
    claims = _claims(captured)
    assert claims["aud"] == "controller" and claims["sub"] == "spurctld" and "admin" not in claims
    md = _bearer(captured)
    before = _job_ids(c)

    # mint a 10-year root admin token: refused
    code, message, _ = _ctl(
        c, "MintToken", {"username": "root", "admin": True, "lifespanSecs": TEN_YEARS}, md, a, service="Auth"
    )
    assert code == "PERMISSION_DENIED" and "daemon credential" in message, message
    code, message, _ = _ctl(c, "MintToken", {}, md, a, service="Auth")
    assert code == "PERMISSION_DENIED", message
    # submit a job as root: refused, nothing recorded
    spec = {"spec": {"script": "#!/bin/sh\nid -u > /tmp/spsc-pwned\n", "workDir": "/tmp"}}
    code, message, _ = _ctl(c, "SubmitJob", spec, {**md, "x-spur-uid": "0"}, a)
    assert code == "PERMISSION_DENIED" and "cannot act for a user" in message, message
    assert _job_ids(c) == before
    # drain a node, cancel another's job: refused, nothing changed
    code, message, _ = _ctl(c, "UpdateNode", {"nodes": "n1", "state": "DRAIN", "reason": "pwned"}, md, a)
    assert code == "PERMISSION_DENIED", message
    code, message, _ = _ctl(c, "CancelJob", {"jobId": str(victim)}, md, a)
    assert code == "PERMISSION_DENIED", message
    # nor pose as the agent (heartbeats need the agent audience)
    code, message, _ = _ctl(c, "Heartbeat", {"name": "n1"}, md, a)
    assert code == "PERMISSION_DENIED" and "agent credential" in message, message
    assert {n.name: n.state for n in c.nodes()}["n1"] in ("mixed", "allocated")
    assert c.job(victim).state == "RUNNING"
    assert not Path("/tmp/spsc-pwned").exists()
    # the captured token still does what the controller needs on an agent (it is a controller credential)
    code, message, _ = _agent(c, "n1", "StreamOutput", {"jobId": str(victim)}, md, a)
    assert code != "UNAUTHENTICATED", message
    c.call("CancelJob", pb.CancelJobRequest(job_id=victim))
    c.wait_job(victim, "CANCELLED", timeout=30)


def test_over_long_and_future_tokens_are_refused_everywhere(cluster: Cluster, shared: Path, users) -> None:
    c = cluster
    a = users["a"]
    now = time.time()
    forever = mint(KEY, a.pw_name, a.pw_uid, now=now, ttl_secs=TEN_YEARS, gid=a.pw_gid)
    future = mint(KEY, a.pw_name, a.pw_uid, now=now + 3600, ttl_secs=600, gid=a.pw_gid)
    for token, why in ((forever, "auth.max_token_lifespan"), (future, "issued in the future")):
        code, message, _ = _ctl(c, "GetJobs", {}, _bearer(token), a.pw_name)
        assert code == "UNAUTHENTICATED" and why in message, message
        code, message, _ = _agent(c, "n1", "StreamOutput", {"jobId": "1"}, _bearer(token), a.pw_name)
        assert code == "UNAUTHENTICATED" and why in message, message
    # asking for one is refused too, even by root
    code, message, _ = _ctl(c, "MintToken", {"lifespanSecs": TEN_YEARS}, _root_md(), service="Auth")
    assert code == "INVALID_ARGUMENT" and "max_token_lifespan" in message, message
    out = _cli(c, shared, a.pw_name, "scontrol", "token", f"lifespan={TEN_YEARS}")
    assert out.returncode != 0 and "max_token_lifespan" in out.stderr


def test_a_revoked_token_is_refused_by_controller_and_agent_and_after_a_restart(
    cluster: Cluster, shared: Path, users
) -> None:
    c = cluster
    a, b = users["a"].pw_name, users["b"].pw_name
    token, token_id = _user_token(c, shared, a)
    other, other_id = _user_token(c, shared, a)
    assert token_id != other_id
    # a job of a's, and its output on the agent, with the token
    out = _cli(
        c,
        shared,
        a,
        "sbatch",
        "--parsable",
        "-o",
        "/dev/null",
        "--wrap",
        "exec sleep 300",
        env={"SLURM_JWT": token},
    )
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip())
    c.wait_job(job, "RUNNING", timeout=60)
    assert _agent(c, "n1", "StreamOutput", {"jobId": str(job)}, _bearer(token), a)[0] == "OK"

    # b may not revoke a's token, by id or by the token; a may not revoke by id (that is an admin's)
    for who, what in ((b, token_id), (b, token), (a, token_id)):
        done = _cli(c, shared, who, "scontrol", "token", "revoke", what)
        assert done.returncode != 0 and "Access/permission denied" in done.stderr, done.stderr
    assert _ctl(c, "GetJobs", {}, _bearer(token), a)[0] == "OK"
    # a revokes its own token by presenting it
    done = _cli(c, shared, a, "spur", "token", "revoke", token)
    assert done.returncode == 0 and f"token {token_id} revoked" in done.stdout, done.stderr
    code, message, _ = _ctl(c, "GetJobs", {}, _bearer(token), a)
    assert code == "UNAUTHENTICATED" and "revoked" in message
    # the agent learns the deny-list from the controller
    wait_for(
        lambda: (
            _agent(c, "n1", "StreamOutput", {"jobId": str(job)}, _bearer(token), a)[0] == "UNAUTHENTICATED"
        ),
        timeout=40,
        what="spurd to refuse the revoked token",
    )
    code, message, _ = _agent(c, "n1", "StreamOutput", {"jobId": str(job)}, _bearer(token), a)
    assert "revoked" in message
    # a's other token, and the job, are untouched
    assert _ctl(c, "GetJobs", {}, _bearer(other), a)[0] == "OK"
    assert _agent(c, "n1", "StreamOutput", {"jobId": str(job)}, _bearer(other), a)[0] == "OK"
    assert c.job(job).state == "RUNNING"
    # root revokes the other one by id
    done = subprocess.run(
        [str(BIN / "scontrol"), "token", "revoke", other_id],
        env={**c.env, "SLURM_JWT": _root_md()["authorization"][7:]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and f"token {other_id} revoked" in done.stdout, done.stderr
    assert _ctl(c, "GetJobs", {}, _bearer(other), a)[0] == "UNAUTHENTICATED"

    # the deny-list is replicated state: it survives a controller restart
    assert c.controller is not None
    c.controller.kill(signal.SIGTERM)
    c.start_controller()
    wait_for(lambda: _ctl(c, "GetJobs", {}, _root_md())[0] == "OK", timeout=30, what="spurctld back")
    for revoked in (token, other):
        code, message, _ = _ctl(c, "GetJobs", {}, _bearer(revoked), a)
        assert code == "UNAUTHENTICATED" and "revoked" in message, message
    fresh, _ = _user_token(c, shared, a)
    assert _ctl(c, "GetJobs", {}, _bearer(fresh), a)[0] == "OK"
    c.call("CancelJob", pb.CancelJobRequest(job_id=job))
    c.wait_job(job, "CANCELLED", timeout=30)


def test_revoking_a_join_token_ends_the_credentials_it_issued(cluster: Cluster) -> None:
    c = cluster
    join = _create_join_token(c, uses=1)
    c.start_agent("n2", cpus=1, extra=["--join-token", join])
    c.wait_nodes("n2", timeout=40)
    code, message, _ = _ctl(c, "RevokeToken", {"id": join.split(".")[0]}, _root_md(), service="Admission")
    assert code == "OK", message
    wait_for(
        lambda: "refused" in c.agents["n2"].log() and {n.name: n.state for n in c.nodes()}["n2"] == "down",
        timeout=40,
        what="n2's heartbeats refused and the node down",
    )
    assert "credential is not valid" in c.controller.log()
    assert {n.name: n.state for n in c.nodes()}["n1"] in ("idle", "mixed", "allocated")
    c.agents["n2"].kill()


def test_a_forged_group_header_records_a_verified_gid(cluster: Cluster, users) -> None:
    c = cluster
    a = users["a"]
    # a token without gid (as real Slurm's scontrol token mints them) plus a claimed root group
    token = mint(KEY, a.pw_name, a.pw_uid, now=time.time(), ttl_secs=600)
    spec = {"spec": {"script": "#!/bin/sh\ntrue\n", "workDir": "/tmp", "hold": True}}
    recorded = {}
    for claimed in ("0", str(users["extra_gid"])):
        md = {**_bearer(token), "x-spur-gid": claimed, "x-spur-group": "root"}
        code, message, response = _ctl(c, "SubmitJob", spec, md, a.pw_name)
        assert code == "OK", message
        job = c.job(int(response["jobId"]))
        recorded[claimed] = (job.gid, job.group)
        c.call(
            "CancelJob",
            pb.CancelJobRequest(job_id=job.job_id),
        )
    primary = grp.getgrgid(a.pw_gid).gr_name
    assert recorded["0"] == (a.pw_gid, primary)  # not root's: the user's own primary group
    extra = users["extra_gid"]
    assert recorded[str(extra)] == (extra, grp.getgrgid(extra).gr_name)  # a group the user is in
    # a token carrying a gid wins, and a header disagreeing with it is refused
    with_gid = mint(KEY, a.pw_name, a.pw_uid, now=time.time(), ttl_secs=600, gid=a.pw_gid)
    code, message, _ = _ctl(c, "SubmitJob", spec, {**_bearer(with_gid), "x-spur-gid": "0"}, a.pw_name)
    assert code == "PERMISSION_DENIED" and "disagrees" in message


def test_rest_attach_to_a_users_job_still_works_with_scoped_credentials(
    cluster: Cluster, shared: Path, users
) -> None:
    c = cluster
    a = users["a"].pw_name
    token, _ = _user_token(c, shared, a)
    script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done"
    out = _cli(
        c,
        shared,
        a,
        "sbatch",
        "--parsable",
        "-o",
        "attach-%j.out",
        "--wrap",
        script,
        env={"SLURM_JWT": token},
    )
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip())
    attach = _cli(
        c,
        shared,
        a,
        "sattach",
        str(job),
        env={"SLURM_JWT": token, "SPUR_REST_URL": f"http://127.0.0.1:{c.rest_port}"},
    )
    assert attach.returncode == 0, attach.stderr
    assert attach.stdout == "".join(f"line {i}\n" for i in range(1, 7))
