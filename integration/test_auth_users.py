"""The local credential broker with two real Unix users (created here with useradd, removed after).

Each user's CLI gets a token for itself only; user A cannot cancel user B's job or mint B's token;
root can cancel it; A's job runs with A's uid. Needs root (useradd, runuser, a root spurd).
"""

from __future__ import annotations

import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest

from integration.as_user import needs_users, run_cli_as
from integration.harness import BIN, Cluster, wait_for
from integration.test_auth import KEY, _kill_jobs, _write_key
from spur.auth.tokens import mint

pytestmark = needs_users


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, pwd.struct_passwd]]:
    suffix = secrets.token_hex(3)
    names = {"a": f"spura{suffix}", "b": f"spurb{suffix}"}
    created: list[str] = []
    try:
        for name in names.values():
            subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, capture_output=True)
            created.append(name)
        yield {k: pwd.getpwnam(v) for k, v in names.items()}
    finally:
        for name in created:
            subprocess.run(["userdel", "-f", name], capture_output=True)


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A directory every user can write to (job output, the broker socket), like a shared /home."""
    path = Path(tempfile.mkdtemp(prefix="spur-auth-users-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(shared: Path) -> Iterator[Cluster]:
    # Under the shared directory: job users must reach the batch script in the agent's state dir.
    root = shared / "cluster"
    root.mkdir(mode=0o755)
    conf_extra = (
        f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(root / "jwt.key")}"\n'
        f'broker_socket = "{shared / "auth.sock"}"\n'
    )
    c = Cluster(root, conf_extra=conf_extra, agent_conf=True)
    c.metadata = {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=3600)}"}
    c.start_controller()
    c.start_agent("n1", cpus=4)
    c.wait_nodes("n1")
    conf = shared / "spur.conf"
    shutil.copy(root / "spur.conf", conf)
    conf.chmod(0o644)
    try:
        yield c
    finally:
        c.stop()
        _kill_jobs(c)


def _cli(cluster: Cluster, shared: Path, user: str | None, *args: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "SPUR_CONTROLLER": cluster.address,
        "SPUR_CONF": str(shared / "spur.conf"),
        "LANG": "C.UTF-8",
    }
    if user is not None:
        return run_cli_as(user, env, args, shared)
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=shared, env=env, capture_output=True, text=True, timeout=60
    )


def _token_claims(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("SLURM_JWT=")
    return jwt.decode(line.split("=", 1)[1], KEY, algorithms=["HS256"], audience="client")


def test_each_user_gets_a_token_for_itself_only(cluster: Cluster, shared: Path, users: dict) -> None:
    for who in ("a", "b"):
        claims = _token_claims(_cli(cluster, shared, users[who].pw_name, "scontrol", "token"))
        assert (claims["sun"], claims["uid"]) == (users[who].pw_name, users[who].pw_uid)
        assert "admin" not in claims
    other = _cli(cluster, shared, users["a"].pw_name, "scontrol", "token", f"username={users['b'].pw_name}")
    assert other.returncode != 0
    assert "Access/permission denied" in other.stderr and users["b"].pw_name in other.stderr
    mine = _cli(cluster, shared, users["a"].pw_name, "spur", "token", "--lifespan", "60")
    assert _token_claims(mine)["sun"] == users["a"].pw_name
    elevated = _cli(cluster, shared, users["a"].pw_name, "spur", "token", "--admin")
    assert elevated.returncode != 0 and "Access/permission denied: an admin token" in elevated.stderr
    # root may mint admin tokens; one lets its holder act as an administrator from any host
    admin = _token_claims(_cli(cluster, shared, None, "spur", "token", "--admin", "--lifespan", "600"))
    assert admin["admin"] is True and admin["sun"] == "root"
    # root may mint for anyone
    claims = _token_claims(_cli(cluster, shared, None, "scontrol", "token", f"username={users['b'].pw_name}"))
    assert (claims["sun"], claims["uid"]) == (users["b"].pw_name, users["b"].pw_uid)


def test_cancel_is_limited_to_the_owner_or_root_and_jobs_run_as_their_user(
    cluster: Cluster, shared: Path, users: dict
) -> None:
    a, b = users["a"].pw_name, users["b"].pw_name
    submit_a = _cli(cluster, shared, a, "sbatch", "--parsable", "-o", "id-%j.txt", "--wrap", "id -u")
    assert submit_a.returncode == 0, submit_a.stderr
    job_a = int(submit_a.stdout.strip())
    submit_b = _cli(cluster, shared, b, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "exec sleep 300")
    assert submit_b.returncode == 0, submit_b.stderr
    job_b = int(submit_b.stdout.strip())

    done = cluster.wait_job(job_a, "COMPLETED", "FAILED", timeout=60)
    out = shared / f"id-{job_a}.txt"
    assert done.state == "COMPLETED", out.read_text() if out.exists() else done
    assert done.uid == users["a"].pw_uid
    assert out.read_text().strip() == str(users["a"].pw_uid)
    assert out.stat().st_uid == users["a"].pw_uid

    cluster.wait_job(job_b, "RUNNING", timeout=60)
    refused = _cli(cluster, shared, a, "scancel", str(job_b))
    assert refused.returncode != 0
    assert "Access/permission denied" in refused.stderr
    assert cluster.job(job_b).state == "RUNNING"
    drain = ("scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=maintenance")
    denied = _cli(cluster, shared, a, *drain)
    assert denied.returncode != 0
    assert "Access/permission denied: updating nodes" in denied.stderr and f"user {a}" in denied.stderr

    allowed = _cli(cluster, shared, None, "scancel", str(job_b))
    assert allowed.returncode == 0, allowed.stderr
    wait_for(lambda: cluster.job(job_b).state == "CANCELLED", timeout=30, what=f"job {job_b} cancelled")
    assert _cli(cluster, shared, None, *drain).returncode == 0
    assert _cli(cluster, shared, None, "scontrol", "update", "NodeName=n1", "State=RESUME").returncode == 0
