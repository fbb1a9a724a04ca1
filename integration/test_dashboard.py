"""The dashboard over HTTP against real spurctld + spurd ([auth] mode = "required"): sign-in, refusals,
CSRF, actions as owner/other user/admin, the live event stream, ``[rest] ui = false``."""

from __future__ import annotations

import contextlib
import pwd
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.as_user import needs_users
from integration.harness import Cluster, wait_for
from integration.test_auth import KEY, _kill_jobs, _write_key
from spur.auth.tokens import mint
from spur.rpc.proto import spur_pb2 as pb


def _token(user: str, uid: int, ttl: float = 3600) -> str:
    return mint(KEY, user, uid, now=time.time(), ttl_secs=ttl)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("dash")
    root.chmod(0o755)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(root / "jwt.key")}"\n'
    c = Cluster(root, conf_extra=conf, agent_conf=True)
    c.metadata = {"authorization": f"Bearer {_token('root', 0)}"}
    c.start_controller()
    c.start_agent("n1", cpus=4)
    c.wait_nodes("n1")
    c.wait_rest()
    try:
        yield c
    finally:
        c.stop()
        _kill_jobs(c)


def _client(c: Cluster) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{c.rest_port}", timeout=30)


@contextlib.contextmanager
def _signed_in(c: Cluster, token: str) -> Iterator[httpx.Client]:
    with _client(c) as h:
        r = h.post("/ui/login", data={"token": token})
        assert r.status_code == 303, r.text
        yield h


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m is not None
    return m.group(1)


def test_sign_in_is_required_and_checked_by_the_auth_policy(cluster: Cluster) -> None:
    with _client(cluster) as h:
        assert h.get("/ui/jobs").headers["location"] == "/ui/login"
        assert h.get("/ui/events", params={"page": "/ui/"}).status_code == 401
        forged = mint(b"another-key-0123456789abcdef0123456789", "root", 0, now=time.time(), ttl_secs=60)
        r = h.post("/ui/login", data={"token": forged})
        assert r.status_code == 401 and "Sign-in refused" in r.text and "set-cookie" not in r.headers
        # a body without a session is refused before it is read (except the sign-in form)
        assert h.post("/ui/job/1/action", data={"action": "cancel"}).status_code == 401
        assert h.post("/ui/login", content=b"x" * 70_000).status_code == 413
        token = _token("root", 0, ttl=600)
        r = h.post("/ui/login", data={"token": f"SLURM_JWT={token}"})
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui/" in cookie
        max_age = int(re.search(r"Max-Age=(\d+)", cookie).group(1))  # type: ignore[union-attr]
        assert 590 <= max_age <= 600
        page = h.get("/ui/")
        assert page.status_code == 200 and "root (admin)" in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]


def test_spur_web_link_signs_in_once(cluster: Cluster) -> None:
    base = f"http://127.0.0.1:{cluster.rest_port}"
    link = cluster.cli("spur", "web", "--no-browser", "--url", base, "--lifespan", "300").stdout.strip()
    assert link.startswith(f"{base}/ui/login/link?token=")
    with _client(cluster) as h:
        r = h.get(link[len(base):])
        assert r.status_code == 303 and "Max-Age=" in r.headers["set-cookie"]
        assert h.get("/ui/nodes").status_code == 200
    with _client(cluster) as h:
        again = h.get(link[len(base):])
        assert again.status_code == 401 and "already been used" in again.text


def test_pages_show_the_cluster_as_the_cli_does(cluster: Cluster) -> None:
    job_id = cluster.submit_spec(script="#!/bin/sh\necho dashboard-out\nsleep 30\n", name="dash-run", cpus_per_task=2)
    cluster.wait_job(job_id, "RUNNING")
    with _signed_in(cluster, _token("root", 0)) as h:
        overview = h.get("/ui/").text
        sinfo = cluster.cli("sinfo", "-h", "-o", "%C").stdout.strip()  # A/I/O/T
        alloc, _idle, _other, total = sinfo.split("/")
        assert f'id="count-cpus">{alloc}/{total}<' in overview
        assert re.search(r'data-series="allocated" data-last="' + alloc + '"', overview)
        assert 'id="count-running">1<' in overview
        jobs = h.get("/ui/jobs").text
        assert f'data-job="{job_id}" data-state="RUNNING"' in jobs and "dash-run" in jobs
        assert h.get("/ui/jobs", params={"state": "nope"}).status_code == 400
        job = h.get(f"/ui/job/{job_id}").text
        assert "Started" in job and 'id="stdout"' in job
        cluster_page = h.get("/ui/cluster").text
        assert re.search(r"<td>[Ll]eader</td>", cluster_page)
        # Managed Kubernetes is off here: the page says so in `spur k8s status`'s words.
        off = cluster.cli("spur", "k8s", "status", check=False).stderr
        assert "[cluster] enabled = false" in off
        assert '<p id="k8s-note">Spur-managed Kubernetes is off ([cluster] enabled = false).' in cluster_page
        assert '<p id="mesh-note">No node has joined the mesh.</p>' in cluster_page
        assert h.get("/ui/accounting").status_code == 200
        nodes = h.get("/ui/nodes").text
        assert 'aria-valuenow="2"' in nodes
        # the live stream: the page now, then the job's output, then the change when it is cancelled
        with h.stream("GET", "/ui/events", params={"page": f"/ui/job/{job_id}"}) as events:
            lines = events.iter_lines()
            seen = ""
            for line in lines:
                seen += line + "\n"
                if "dashboard-out" in line:
                    break
            assert "event: live" in seen and "event: output" in seen
            r = h.post(f"/ui/job/{job_id}/action", data={"action": "cancel", "csrf": _csrf(job)})
            assert r.status_code == 303
            for line in lines:
                if line.startswith("event: end"):
                    break
    assert cluster.wait_job(job_id, "CANCELLED").state == "CANCELLED"


def test_actions_need_the_csrf_token(cluster: Cluster) -> None:
    job_id = cluster.submit_spec(script="#!/bin/sh\nsleep 30\n", hold=True)
    with _signed_in(cluster, _token("root", 0)) as h:
        for csrf in ("", "wrong"):
            r = h.post(f"/ui/job/{job_id}/action", data={"action": "cancel", "csrf": csrf})
            assert r.status_code == 403 and "CSRF" in r.text
        assert cluster.job(job_id).state == "PENDING"
        page = h.get(f"/ui/job/{job_id}").text
        assert "Held by" in page
        r = h.post(f"/ui/job/{job_id}/action", data={"action": "release", "csrf": _csrf(page)})
        assert r.status_code == 303
        assert f"Job {job_id}: release done." in h.get(f"/ui/job/{job_id}").text
        h.post(f"/ui/job/{job_id}/action", data={"action": "cancel", "csrf": _csrf(page)})
    cluster.wait_job(job_id, "CANCELLED")


@pytest.fixture(scope="module")
def other_user() -> Iterator[pwd.struct_passwd]:
    name = f"spurui{secrets.token_hex(3)}"
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-f", name], capture_output=True)


@needs_users
def test_another_user_sees_but_cannot_act(cluster: Cluster, other_user: pwd.struct_passwd) -> None:
    job_id = cluster.submit_spec(script="#!/bin/sh\nsleep 30\n", hold=True, name="roots-job")
    with _signed_in(cluster, _token(other_user.pw_name, other_user.pw_uid)) as h:
        page = h.get(f"/ui/job/{job_id}").text
        assert "roots-job" in page and 'id="action-cancel"' not in page and 'id="stdout"' not in page
        csrf = _csrf(page)
        r = h.post(f"/ui/job/{job_id}/action", data={"action": "cancel", "csrf": csrf})
        assert r.status_code == 403 and "ermission denied" in r.text
        assert cluster.job(job_id).state == "PENDING"
        nodes = h.get("/ui/nodes").text
        assert 'id="drain-n1"' not in nodes
        r = h.post("/ui/node/n1/action", data={"action": "drain", "reason": "x", "csrf": csrf})
        assert r.status_code == 403
        assert {n.name: n.state for n in cluster.nodes()}["n1"] == "idle"
    cluster.call("CancelJob", pb.CancelJobRequest(job_id=job_id))


def test_admin_drains_and_resumes_a_node(cluster: Cluster) -> None:
    with _signed_in(cluster, _token("root", 0)) as h:
        page = h.get("/ui/nodes").text
        r = h.post("/ui/node/n1/action", data={"action": "drain", "reason": "", "csrf": _csrf(page)})
        assert r.status_code == 400 and "reason" in r.text
        r = h.post("/ui/node/n1/action", data={"action": "drain", "reason": "ui test", "csrf": _csrf(page)})
        assert r.status_code == 303
        wait_for(lambda: {n.name: n.state for n in cluster.nodes()}["n1"] == "drained", what="n1 drained")
        assert "ui test" in cluster.cli("sinfo", "-R", "-h").stdout
        page = h.get("/ui/nodes").text
        assert 'id="resume-n1"' in page
        h.post("/ui/node/n1/action", data={"action": "resume", "csrf": _csrf(page)})
        cluster.wait_nodes("n1")


def test_ui_false_serves_no_dashboard(tmp_path: Path) -> None:
    c = Cluster(tmp_path, conf_extra="[rest]\nui = false\n")
    c.start_controller()
    try:
        c.wait_rest()
        with _client(c) as h:
            assert h.get("/ui/login").status_code == 404
            assert h.get("/ui/").status_code == 404
    finally:
        c.stop()
