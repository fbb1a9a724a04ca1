"""The REST API, job-output WebSocket and metrics of a real spurctld (+ one spurd) on loopback.

A scripted client session compares bodies field by field with real slurmrestd 22.05 responses
(../shared/reference/slurmrestd-22.05, copied under tests/fixtures/slurmrestd): same field names,
same JSON types; values that differ by nature (times, ids, host names) are compared by type only.
"""

from __future__ import annotations

import getpass
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.harness import BIN, Cluster, free_port, wait_for
from spur.auth.tokens import mint
from spur.rest.errors import AUTHENTICATION_FAILED

pytestmark = pytest.mark.integration

REFERENCE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "slurmrestd"
S = "/slurm/v0.0.38"
D = "/slurmdb/v0.0.38"
USER = getpass.getuser()


def reference(name: str) -> dict[str, Any]:
    """A real slurmrestd 22.05 answer, its ``meta`` version numbers as the document declares them
    (strings: 22.05 sent ints, which a client generated from its document cannot parse)."""
    data = json.loads((REFERENCE / name).read_text())
    version = data.get("meta", {}).get("Slurm", {}).get("version")
    if version:
        data["meta"]["Slurm"]["version"] = {k: str(v) for k, v in version.items()}
    return data


def same_shape(ours: Any, theirs: Any, path: str = "$") -> list[str]:
    """Differences in field names and JSON types between two bodies (values are not compared;
    a null on either side matches any type, as slurmrestd sends null for "not set")."""
    if ours is None or theirs is None:
        return []
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return [] if type(ours) is type(theirs) else [f"{path}: {type(ours).__name__} != {type(theirs).__name__}"]
    if isinstance(theirs, int | float) and isinstance(ours, int | float):
        return [] if isinstance(ours, float) == isinstance(theirs, float) else [f"{path}: number kind differs"]
    if type(ours) is not type(theirs):
        return [f"{path}: {type(ours).__name__} != {type(theirs).__name__}"]
    if isinstance(theirs, dict):
        diffs = [f"{path}.{k}: missing" for k in theirs if k not in ours]
        for key in theirs:
            if key in ours:
                diffs += same_shape(ours[key], theirs[key], f"{path}.{key}")
        return diffs
    if isinstance(theirs, list) and theirs and ours:
        return same_shape(ours[0], theirs[0], f"{path}[0]")
    return []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("rest")
    c = Cluster(root, conf_extra="[rest]\nmax_body_bytes = 65536\nmax_json_depth = 16\n")
    c.agent_metrics_port = free_port()  # type: ignore[attr-defined]
    c.start_controller()
    c.wait_rest()
    c.start_agent("n1", cpus=4, extra=["--metrics-addr", f"127.0.0.1:{c.agent_metrics_port}"])  # type: ignore[attr-defined]
    c.wait_nodes("n1")
    yield c
    for proc in [*c.agents.values(), c.controller]:
        if proc is not None:
            proc.kill()


@pytest.fixture()
def api(cluster: Cluster):
    with httpx.Client(
        base_url=f"http://127.0.0.1:{cluster.rest_port}", headers={"X-SLURM-USER-NAME": USER}, timeout=30
    ) as client:
        yield client


def submit(api: httpx.Client, cwd: Path, script: str, **job: Any) -> int:
    job.setdefault("environment", {"PATH": "/usr/bin:/bin"})
    job.setdefault("current_working_directory", str(cwd))
    r = api.post(f"{S}/job/submit", json={"script": script, "job": job})
    assert r.status_code == 200, r.text
    return r.json()["job_id"]


def job_state(api: httpx.Client, job_id: int) -> str:
    return api.get(f"{S}/job/{job_id}").json()["jobs"][0]["job_state"]


def test_scripted_client_session(cluster: Cluster, api: httpx.Client, tmp_path: Path) -> None:
    # ping: shape of slurmrestd's, mode by Raft role
    ping = api.get(f"{S}/ping")
    assert ping.status_code == 200
    assert same_shape(ping.json(), reference("slurm_ping.json")) == []
    assert ping.json()["pings"][0]["mode"] == "primary" and ping.json()["pings"][0]["ping"] == "UP"

    # submit: the response is slurmrestd's, field by field
    r = api.post(
        f"{S}/job/submit",
        json={
            "script": "#!/bin/sh\necho \"hello $GREETING from $(pwd)\"\n",
            "job": {
                "name": "resttest",
                "environment": {"GREETING": "rest", "PATH": "/usr/bin:/bin"},
                "current_working_directory": str(tmp_path),
                "time_limit": 5,
                "standard_output": "out-%j.txt",
            },
        },
    )
    assert r.status_code == 200, r.text
    submitted = r.json()
    assert same_shape(submitted, reference("job_submit.json")) == []
    assert submitted["errors"] == [] and submitted["step_id"] == "BATCH"
    job_id = submitted["job_id"]

    wait_for(lambda: job_state(api, job_id) == "COMPLETED", timeout=30, what="the job to complete")
    job = api.get(f"{S}/job/{job_id}").json()
    assert same_shape(job, reference("slurm_job_2.json")) == []
    ref_job = reference("slurm_job_2.json")["jobs"][0]
    assert set(job["jobs"][0]) == set(ref_job), "same field names as slurmrestd 22.05"
    got = job["jobs"][0]
    assert got["name"] == "resttest" and got["user_name"] == USER and got["time_limit"] == 5
    assert got["user_id"] == os.getuid() and got["current_working_directory"] == str(tmp_path)
    assert got["exit_code"] == 0 and got["batch_flag"] is True and got["nodes"] == "n1"

    # the job ran as the user, with the submitted environment and working directory
    out = tmp_path / f"out-{job_id}.txt"
    assert out.read_text() == f"hello rest from {tmp_path}\n"

    # sacct's view through slurmdb
    db = api.get(f"{D}/jobs", params={"job_name": "resttest"}).json()
    assert db["meta"]["plugin"]["type"] == "openapi/dbv0.0.38"
    rows = [j for j in db["jobs"] if j["job_id"] == job_id]
    assert len(rows) == 1 and rows[0]["state"]["current"] == "COMPLETED"
    assert rows[0]["exit_code"] == {"status": "SUCCESS", "return_code": 0}
    assert rows[0]["user"] == USER and rows[0]["working_directory"] == str(tmp_path)
    one = api.get(f"{D}/job/{job_id}").json()
    assert [j["job_id"] for j in one["jobs"]] == [job_id]

    # cancel a running job
    running = submit(api, tmp_path, "#!/bin/sh\nsleep 300\n", name="sleeper")
    wait_for(lambda: job_state(api, running) == "RUNNING", timeout=30, what="the sleeper to run")
    r = api.delete(f"{S}/job/{running}")
    assert r.status_code == 200 and r.json()["errors"] == []
    wait_for(lambda: job_state(api, running) == "CANCELLED", timeout=30, what="the cancel")

    # unknown job: slurmrestd's error body, exactly
    missing = api.get(f"{S}/job/99999")
    assert missing.status_code == 404
    ref_missing = reference("job_missing.json")
    body = missing.json()
    assert body["errors"] == ref_missing["errors"] and body["jobs"] == []
    assert body["meta"] == ref_missing["meta"]


def test_no_identity_is_401_and_unknown_user_too(cluster: Cluster) -> None:
    base = f"http://127.0.0.1:{cluster.rest_port}"
    r = httpx.get(f"{base}{S}/jobs")
    assert r.status_code == 401
    assert r.json()["errors"][0]["error_number"] == 1007 and r.json()["jobs"] == []
    r = httpx.get(f"{base}{S}/jobs", headers={"X-SLURM-USER-NAME": "no-such-user-here"})
    assert r.status_code == 401
    assert r.json()["errors"][0]["description"] == AUTHENTICATION_FAILED  # never names the user


def test_submit_errors_use_slurm_numbers(api: httpx.Client, tmp_path: Path) -> None:
    def count() -> int:
        return len(api.get(f"{S}/jobs").json()["jobs"])

    before = count()
    r = api.post(f"{S}/job/submit", json={"job": {"environment": {}}})
    assert r.status_code == 400 and r.json()["errors"][0]["error_number"] == 2009
    r = api.post(f"{S}/job/submit", json={"script": "#!/bin/sh\ntrue\n", "jobs": [{"environment": {}}]})
    assert r.status_code == 400 and r.json()["errors"][0]["error_number"] == 2036
    r = api.post(
        f"{S}/job/submit",
        json={"script": "#!/bin/sh\ntrue\n", "job": {"environment": {}, "partition": "nope", "current_working_directory": "/tmp"}},
    )
    assert r.status_code == 400 and r.json()["errors"][0]["error_number"] == 2000, r.text
    r = api.post(f"{S}/job/submit", json={"script": "#!/bin/sh\ntrue\n", "job": {"environment": {}, "tasks": "x"}})
    assert r.status_code == 400 and "job.tasks" in r.json()["errors"][0]["description"]
    assert count() == before


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (b"x" * 70000, 413),  # over [rest] max_body_bytes = 65536
        (b"[" * 40 + b"]" * 40, 400),  # deeper than max_json_depth = 16
        (b"[" * 100000 + b"]" * 100000, 413),
        (b"{\"script\": ", 400),
        (b"\xff\xfe", 400),
        (b"[1, 2]", 400),
        (b"", 400),
    ],
)
def test_request_limits_and_malformed_bodies(api: httpx.Client, payload: bytes, status: int) -> None:
    before = api.get(f"{S}/jobs").json()["jobs"]
    r = api.post(f"{S}/job/submit", content=payload, headers={"Content-Type": "application/json"})
    assert r.status_code == status or (status == 400 and r.status_code == 400), r.text
    assert r.status_code < 500 and r.json()["errors"], r.text
    assert api.get(f"{S}/jobs").json()["jobs"] == before


def test_string_limit(cluster: Cluster, tmp_path: Path) -> None:
    """A string longer than max_string_length is a 400 (separate controller: a small limit)."""
    c = Cluster(tmp_path, conf_extra="[rest]\nmax_string_length = 100\n")
    c.start_controller()
    c.wait_rest()
    try:
        r = httpx.post(
            f"http://127.0.0.1:{c.rest_port}{S}/job/submit",
            headers={"X-SLURM-USER-NAME": USER},
            json={"script": "#!/bin/sh\n" + "x" * 200, "job": {"environment": {}}},
        )
        assert r.status_code == 400 and "longer than the limit" in r.json()["errors"][0]["description"]
    finally:
        c.controller.kill()


def test_update_hold_release_and_time_limit(api: httpx.Client, tmp_path: Path) -> None:
    job_id = submit(api, tmp_path, "#!/bin/sh\ntrue\n", hold=True, name="held")
    job = api.get(f"{S}/job/{job_id}").json()["jobs"][0]
    assert job["job_state"] == "PENDING"
    r = api.post(f"{S}/job/{job_id}", json={"time_limit": 7, "comment": "via rest"})
    assert r.status_code == 200, r.text
    job = api.get(f"{S}/job/{job_id}").json()["jobs"][0]
    assert job["time_limit"] == 7 and job["comment"] == "via rest"
    r = api.post(f"{S}/job/{job_id}", json={"hold": False})
    assert r.status_code == 200, r.text
    wait_for(lambda: job_state(api, job_id) == "COMPLETED", timeout=30, what="the released job")


def test_nodes_partitions_and_misc(api: httpx.Client) -> None:
    nodes = api.get(f"{S}/nodes").json()["nodes"]
    assert [n["name"] for n in nodes] == ["n1"] and nodes[0]["cpus"] == 4
    assert api.get(f"{S}/node/n1").json()["nodes"][0]["name"] == "n1"
    missing = api.get(f"{S}/node/zz9")
    assert missing.status_code == 404 and missing.json()["errors"][0]["error_number"] == 2018
    parts = api.get(f"{S}/partitions").json()["partitions"]
    assert parts[0]["name"] == "default" and parts[0]["total_cpus"] == 4 and parts[0]["nodes"] == "n1"
    assert api.get(f"{S}/partition/nope").status_code == 404
    assert api.get(f"{S}/reservations").json()["reservations"] == []
    assert api.get(f"{S}/licenses").json()["licenses"] == []
    stats = api.get(f"{S}/diag").json()["statistics"]
    assert stats["jobs_submitted"] >= 0 and isinstance(stats["req_time"], int)
    assert api.get(f"{D}/diag").json()["statistics"]["RPCs"]
    assert api.get(f"{D}/config").json()["tres"][0][0]["type"] == "cpu"


def test_openapi_documents_exactly_the_registered_routes(api: httpx.Client) -> None:
    doc = api.get("/openapi/v3").json()
    assert doc == api.get("/openapi").json() == api.get("/openapi.json").json()
    assert "openapi:" in api.get("/openapi.yaml").text
    paths = set(doc["paths"])
    assert f"{S}/job/submit" in paths and f"{D}/jobs" in paths
    # the accounting backend serves every slurmdb entity operation of the reference document
    from spur.rest.slurmdb import ENTITY_ROUTES

    for route in ENTITY_ROUTES:
        assert route.method in doc["paths"].get(route.path, {}), (route.method, route.path)
    assert api.get(f"{D}/accounts").status_code == 200
    for path, item in doc["paths"].items():
        for method in item:
            if method in ("get", "post", "delete"):
                url = path.replace("{job_id}", "1").replace("{node_name}", "n1")
                url = url.replace("{partition_name}", "default").replace("{reservation_name}", "r")
                r = api.request(method.upper(), url, json={} if method == "post" else None)
                assert r.status_code != 405, (method, path)


def test_websocket_attach_streams_lines_in_order_and_the_end(cluster: Cluster, api: httpx.Client, tmp_path: Path) -> None:
    script = "#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; echo err $i >&2; sleep 0.5; done\nexit 3\n"
    job_id = submit(api, tmp_path, script, standard_error="err-%j.txt", name="chatty")
    env = dict(cluster.env, SPUR_REST_URL=f"http://127.0.0.1:{cluster.rest_port}")
    # attach while pending (waits for the start), and from an offset once it runs
    full = subprocess.Popen([str(BIN / "sattach"), str(job_id)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for(lambda: job_state(api, job_id) == "RUNNING", timeout=30, what="the chatty job to run")
    skip = len("line 1\nline 2\n")
    resumed = subprocess.run(
        [str(BIN / "spur"), "attach", "--offset", str(skip), "--stderr-offset", str(len("err 1\n")), str(job_id)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    out, err = full.communicate(timeout=60)
    assert full.returncode == 3, err  # the job's exit code
    assert out == "".join(f"line {i}\n" for i in range(1, 11))
    assert err == "".join(f"err {i}\n" for i in range(1, 11))
    assert resumed.returncode == 3, resumed.stderr
    assert resumed.stdout == "".join(f"line {i}\n" for i in range(3, 11))
    assert resumed.stderr == "".join(f"err {i}\n" for i in range(2, 11))
    # after the end there is nothing left to follow: attach reports the end at once
    late = subprocess.run([str(BIN / "sattach"), str(job_id)], env=env, capture_output=True, text=True, timeout=30)
    assert late.returncode == 3 and late.stdout == ""


def test_websocket_refuses_a_non_owner(cluster: Cluster, api: httpx.Client, tmp_path: Path) -> None:
    other = next((p for p in pwd.getpwall() if p.pw_uid not in (0, os.getuid())), None)
    if other is None or os.getuid() == 0 and other is None:
        pytest.skip("needs a second local account")
    job_id = submit(api, tmp_path, "#!/bin/sh\nsleep 1\n", name="mine")
    if os.getuid() == 0:
        # root owns the job: a different, unprivileged user is refused
        user = other.pw_name
    else:
        pytest.skip("the non-owner check needs the test to own a job and name another account (root)")
    code = (
        "import sys, trio, trio_websocket\n"
        "async def main():\n"
        "    try:\n"
        f"        async with trio_websocket.open_websocket_url(sys.argv[1], extra_headers=[('X-SLURM-USER-NAME', {user!r})]):\n"
        "            print('accepted')\n"
        "    except trio_websocket.ConnectionRejected as e:\n"
        "        print(e.status_code, e.body.decode())\n"
        "trio.run(main)\n"
    )
    url = f"ws://127.0.0.1:{cluster.rest_port}/spur/v1/job/{job_id}/output"
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=30)
    assert out.stdout.startswith("403 "), out.stdout + out.stderr
    assert json.loads(out.stdout.split(" ", 1)[1])["errors"][0]["error_number"] == 2002


def _scrape(port: int) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


def test_metrics_move_during_a_job_burst(cluster: Cluster, api: httpx.Client, tmp_path: Path) -> None:
    before = _scrape(cluster.metrics_port)
    agent_before = _scrape(cluster.agent_metrics_port)  # type: ignore[attr-defined]
    assert before["spur_raft_role{role=leader}"] == 1 and before["spur_raft_term{}"] >= 1
    ids = [submit(api, tmp_path, "#!/bin/sh\nsleep 0.5\n", name=f"burst{i}") for i in range(6)]
    during = _scrape(cluster.metrics_port)
    assert during["spur_jobs_submitted_total{}"] >= before["spur_jobs_submitted_total{}"] + 6
    assert any(k.startswith("spur_jobs{") for k in during)
    wait_for(lambda: all(job_state(api, j) == "COMPLETED" for j in ids), timeout=60, what="the burst")
    after = _scrape(cluster.metrics_port)
    done = "spur_jobs_completed_total{state=COMPLETED}"
    assert after[done] >= before.get(done, 0) + 6
    assert after["spur_jobs_started_total{}"] >= before["spur_jobs_started_total{}"] + 6
    assert after["spur_scheduler_cycle_duration_seconds_count{}"] > before["spur_scheduler_cycle_duration_seconds_count{}"]
    assert after["spur_raft_applied_index{}"] > before["spur_raft_applied_index{}"]
    rpc = "spur_rpc_requests_total{code=OK,method=ReportJobStatus}"
    assert after[rpc] >= before.get(rpc, 0) + 6
    assert after["spur_nodes{state=idle}"] == 1
    agent_after = _scrape(cluster.agent_metrics_port)  # type: ignore[attr-defined]
    launches = "spur_agent_launches_total{kind=job}"
    assert agent_after[launches] >= agent_before.get(launches, 0) + 6
    assert agent_after["spur_agent_running_jobs{}"] >= 0


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"])
def test_schemathesis_against_each_versions_real_document(cluster: Cluster, tmp_path: Path, version: str) -> None:
    """Every operation of the version's unmodified document, random valid and invalid inputs: no
    5xx, and (v0.0.40+) every answer, errors included, conforms to the document. v0.0.38's document
    declares its error answers as the bare errors array while slurmrestd 22.05 answers an object
    (tests/fixtures/slurmrestd/job_missing.json), as Spur does, so there only 2xx answers are
    checked for conformance (integration/test_rest_versions.py)."""
    base = f"http://127.0.0.1:{cluster.rest_port}"
    checks = "not_a_server_error,content_type_conformance"
    if version != "v0.0.38":
        checks += ",response_schema_conformance"
    proc = subprocess.run(
        [
            str(BIN / "schemathesis"), "run", f"{base}/openapi/{version}.json",
            "--url", base,
            "--header", f"X-SLURM-USER-NAME: {USER}",
            "--checks", checks,
            "--include-path-regex", f"^/slurm(db)?/{version}/",
            "--exclude-path-regex", "reconfigure",
            "--max-examples", "5",
            "--phases", "examples,fuzzing",
            "--suppress-health-check", "all",
            "--request-timeout", "60",  # two shared cores: a busy moment is not a failure
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,  # its cache goes there, not in the repo
    )  # fmt: skip
    (tmp_path / "schemathesis.txt").write_text(proc.stdout + proc.stderr)
    failures = proc.stdout[proc.stdout.find("FAILURES"):][:6000] if "FAILURES" in proc.stdout else proc.stdout[-6000:]
    assert proc.returncode == 0, failures + proc.stderr[-2000:]


def test_required_auth_mode_refuses_requests_without_a_valid_token(tmp_path: Path) -> None:
    """With ``[auth] mode = "required"`` the controller's interceptor refuses REST calls that carry no
    valid token: 401 with Slurm's error body, and nothing changes."""
    c = Cluster(tmp_path, conf_extra='[auth]\nmode = "required"\njwt_key = "rest-test-key-0123456789abcdef-0123"\n')
    c.start_controller()
    c.wait_rest()
    try:
        base = f"http://127.0.0.1:{c.rest_port}"
        for headers in (
            {"X-SLURM-USER-NAME": USER},
            {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": "not.a.jwt"},
            {"Authorization": "Bearer garbage"},
        ):
            r = httpx.post(f"{base}{S}/job/submit", headers=headers,
                           json={"script": "#!/bin/sh\ntrue\n", "job": {"environment": {}}})  # fmt: skip
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["errors"][0]["error_number"] == 1007
            r = httpx.post(f"{base}{D}/accounts", headers=headers, json={"accounts": [{"name": "sneaky"}]})
            assert r.status_code == 401, (headers, r.text)
        # Without a token an existing and a made-up account get the same answer: no enumeration.
        answers = {
            name: httpx.get(f"{base}{S}/jobs", headers={"X-SLURM-USER-NAME": name})
            for name in (USER, "no-such-user-here")
        }
        assert {r.status_code for r in answers.values()} == {401}
        assert {r.json()["errors"][0]["description"] for r in answers.values()} == {AUTHENTICATION_FAILED}
        # nothing changed: with a valid token there is no job and no such account
        token = mint(b"rest-test-key-0123456789abcdef-0123", USER, os.getuid(), now=time.time(), ttl_secs=600)
        valid = {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token}
        assert httpx.get(f"{base}{S}/jobs", headers=valid).json()["jobs"] == []
        assert httpx.get(f"{base}{D}/account/sneaky", headers=valid).status_code == 404
    finally:
        c.controller.kill()


def test_rest_port_in_use_leaves_spurctld_scheduling(tmp_path: Path) -> None:
    """REST and metrics are optional: an address that cannot be bound is logged and spurctld keeps
    serving gRPC; ``[metrics] enabled = false`` serves no metrics at all."""
    import socket

    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        c = Cluster(tmp_path, conf_extra="[metrics]\nenabled = false\n")
        c.rest_port = blocker.getsockname()[1]
        c.start_controller()
        try:
            out = c.cli("squeue")
            assert "JOBID" in out.stdout
            wait_for(lambda: "REST API not served" in c.controller.log(), timeout=10, what="the REST bind error")
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", c.metrics_port), timeout=1).close()
            assert c.controller.alive()
        finally:
            c.controller.kill()
    finally:
        blocker.close()
