"""slurmdb/v0.0.38 accounting entities over REST against a real spurctld, and REST jobs running as the
token's user in ``[auth] mode = "required"``.

The REST accounting backend calls the ``spur.v1.Accounting`` service sacctmgr uses, so what REST
adds sacctmgr shows (and back), and only administrators change entities (403 with Slurm's errors[]
for anyone else, nothing changed).
"""

from __future__ import annotations

import getpass
import json
import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.harness import Cluster, wait_for
from integration.test_rest import same_shape
from spur.auth.tokens import mint

pytestmark = pytest.mark.integration

D = "/slurmdb/v0.0.38"
S = "/slurm/v0.0.38"
USER = getpass.getuser()  # root here: the system administrator
OTHER = "nobody"  # an ordinary local account
REFERENCE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "slurmrestd"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    if os.getuid() != 0:
        pytest.skip("the admin/non-admin checks need the test to run as root (the admin) beside 'nobody'")
    c = Cluster(tmp_path_factory.mktemp("restacct"))
    c.start_controller()
    c.wait_rest()
    yield c
    c.stop()


@pytest.fixture()
def admin(cluster: Cluster):
    with httpx.Client(base_url=f"http://127.0.0.1:{cluster.rest_port}", headers={"X-SLURM-USER-NAME": USER},
                      timeout=30) as client:  # fmt: skip
        yield client


@pytest.fixture()
def user(cluster: Cluster):
    with httpx.Client(base_url=f"http://127.0.0.1:{cluster.rest_port}", headers={"X-SLURM-USER-NAME": OTHER},
                      timeout=30) as client:  # fmt: skip
        yield client


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, (r.request.method, r.request.url, r.status_code, r.text)
    body = r.json()
    assert body["errors"] == [] and body["meta"]["plugin"]["type"] == "openapi/dbv0.0.38"
    return body


def refused(r: httpx.Response, status: int, number: int) -> dict[str, Any]:
    assert r.status_code == status, (r.request.method, r.request.url, r.status_code, r.text)
    err = r.json()["errors"][0]
    assert err["error_number"] == number and set(err) == {"error_number", "error", "description", "source"}
    return err


def test_accounts_round_trip(cluster: Cluster, admin: httpx.Client) -> None:
    ok(admin.post(f"{D}/accounts", json={"accounts": [{"name": "physics", "description": "Physics",
                                                        "organization": "science"}]}))  # fmt: skip
    acct = ok(admin.get(f"{D}/account/physics"))["accounts"]
    assert [(a["name"], a["description"], a["organization"]) for a in acct] == [("physics", "Physics", "science")]
    # no partition, no user: left out (22.05's document declares strings, and no captured 22.05
    # answer shows null there; docs/rest.md)
    assert acct[0]["associations"] == [{"account": "physics", "cluster": "itest"}]
    assert "physics" in [a["name"] for a in ok(admin.get(f"{D}/accounts"))["accounts"]]
    # sacctmgr (gRPC) sees what REST added
    out = cluster.cli("sacctmgr", "-n", "-P", "show", "account", "physics", "format=account,descr,org").stdout
    assert out.strip() == "physics|Physics|science"
    # a second POST updates what it sets
    ok(admin.post(f"{D}/accounts", json={"accounts": [{"name": "physics", "description": "Physics dept"}]}))
    assert ok(admin.get(f"{D}/account/physics"))["accounts"][0]["description"] == "Physics dept"
    ok(admin.delete(f"{D}/account/physics"))
    refused(admin.get(f"{D}/account/physics"), 404, 9003)
    refused(admin.delete(f"{D}/account/physics"), 404, -1)


def test_users_and_associations_round_trip(cluster: Cluster, admin: httpx.Client) -> None:
    ok(admin.post(f"{D}/accounts", json={"accounts": [{"name": "chem"}]}))
    # a new user needs its default account (Spur users always have an association)
    refused(admin.post(f"{D}/users", json={"users": [{"name": OTHER}]}), 400, -1)
    ok(admin.post(f"{D}/users", json={"users": [{"name": OTHER, "default": {"account": "chem"}}]}))
    u = ok(admin.get(f"{D}/user/{OTHER}"))["users"][0]
    assert u["name"] == OTHER and u["default"]["account"] == "chem" and u["administrator_level"] == "None"
    assert u["associations"] == [{"account": "chem", "cluster": "itest", "user": OTHER}]  # no partition: left out

    ok(admin.post(f"{D}/associations", json={"associations": [
        {"account": "chem", "cluster": "itest", "user": OTHER, "shares_raw": 5}]}))  # fmt: skip
    assocs = ok(admin.get(f"{D}/associations", params={"user": OTHER}))["associations"]
    assert [(a["account"], a["user"], a["shares_raw"], a["is_default"]) for a in assocs] == [("chem", OTHER, 5, 1)]
    real = json.loads((REFERENCE / "slurmdb_associations.json").read_text())["associations"][2]
    real.pop("usage")  # 22.05 sends null for this object; Spur leaves it out (a generated client fails on it)
    assert same_shape(assocs[0], real) == []
    assert ok(admin.get(f"{D}/association", params={"account": "chem", "user": OTHER}))["associations"] == assocs
    # limits set with sacctmgr show up in slurmrestd's fields
    cluster.cli("sacctmgr", "-i", "modify", "account", "name=chem", "set", "grptres=cpu=16,mem=32G", "maxjobs=4")
    chem = ok(admin.get(f"{D}/associations", params={"account": "chem"}))["associations"]
    account_assoc = next(a for a in chem if a["user"] is None)
    assert {(t["type"], t["count"]) for t in account_assoc["max"]["tres"]["total"]} == {("cpu", 16), ("mem", 32768)}
    assert account_assoc["max"]["jobs"]["per"]["count"] == 4 and account_assoc["parent_account"] == "root"

    refused(admin.delete(f"{D}/associations"), 400, 9000)  # a query must name an account or a user
    ok(admin.delete(f"{D}/associations", params={"account": "chem", "user": OTHER}))
    assert ok(admin.get(f"{D}/associations", params={"user": OTHER}))["associations"] == []
    ok(admin.delete(f"{D}/user/{OTHER}"))
    refused(admin.get(f"{D}/user/{OTHER}"), 404, 9003)
    ok(admin.delete(f"{D}/account/chem"))


def test_qos_round_trip(admin: httpx.Client) -> None:
    ok(admin.post(f"{D}/qos", json={"qos": [{"name": "high", "description": "High priority", "priority": 100}]}))
    q = ok(admin.get(f"{D}/qos/high"))["qos"]
    assert [(x["name"], x["description"], x["priority"]) for x in q] == [("high", "High priority", 100)]
    assert {x["name"] for x in ok(admin.get(f"{D}/qos"))["qos"]} >= {"normal", "high"}
    ok(admin.post(f"{D}/qos", json={"qos": [{"name": "high", "description": "High priority", "priority": 7}]}))
    assert ok(admin.get(f"{D}/qos/high"))["qos"][0]["priority"] == 7
    ok(admin.delete(f"{D}/qos/high"))
    refused(admin.get(f"{D}/qos/high"), 404, 9003)
    refused(admin.delete(f"{D}/qos/normal"), 400, -1)  # the service's rule, its message
    assert "normal" in {x["name"] for x in ok(admin.get(f"{D}/qos"))["qos"]}


def test_non_admin_changes_are_403_and_change_nothing(admin: httpx.Client, user: httpx.Client) -> None:
    for path, body in (
        ("accounts", {"accounts": [{"name": "sneaky"}]}),
        ("users", {"users": [{"name": OTHER, "administrator_level": "Administrator", "default": {"account": "root"}}]}),
        ("associations", {"associations": [{"account": "root", "cluster": "itest", "user": OTHER}]}),
        ("qos", {"qos": [{"name": "sneaky"}]}),
        ("clusters", {"clusters": [{"name": "sneaky"}]}),
        ("wckeys", {"wckeys": [{"name": "w", "user": OTHER, "cluster": "itest"}]}),
        ("tres", {"tres": [{"type": "cpu"}]}),
    ):
        err = refused(user.post(f"{D}/{path}", json=body), 403, 2002)
        assert err["error"] == "Access/permission denied"
    refused(user.delete(f"{D}/qos/normal"), 403, 2002)
    refused(user.delete(f"{D}/account/root"), 403, 2002)
    # users may read; nothing was added
    assert "sneaky" not in [a["name"] for a in ok(user.get(f"{D}/accounts"))["accounts"]]
    assert OTHER not in [u["name"] for u in ok(admin.get(f"{D}/users"))["users"]]
    assert [c["name"] for c in ok(user.get(f"{D}/clusters"))["clusters"]] == ["itest"]


def test_tres_clusters_and_wckeys(admin: httpx.Client) -> None:
    tres = ok(admin.get(f"{D}/tres"))["tres"]
    assert {"type": "cpu", "name": "", "id": 1, "count": 0} in tres
    assert {"type": "gres", "name": "gpu", "id": 1001, "count": 0} in tres
    refused(admin.post(f"{D}/tres", json={"tres": [{"type": "license", "name": "x"}]}), 400, 2036)
    cl = ok(admin.get(f"{D}/cluster/itest"))["clusters"]
    assert cl[0]["name"] == "itest" and cl[0]["controller"]["port"] > 0
    refused(admin.get(f"{D}/cluster/nope"), 404, 9003)
    # no wckeys, as slurmdbd with TrackWCKey=no: empty list, nothing found, adding refused (not a 500)
    assert ok(admin.get(f"{D}/wckeys"))["wckeys"] == []
    refused(admin.get(f"{D}/wckey/w"), 404, 9003)
    refused(admin.delete(f"{D}/wckey/w"), 404, 9003)
    err = refused(admin.post(f"{D}/wckeys", json={"wckeys": [{"name": "w", "user": USER, "cluster": "itest"}]}), 400, 2036)
    assert err["error"] == "Requested operation not supported on this system"


def test_config_load_then_dump(admin: httpx.Client) -> None:
    ok(admin.post(f"{D}/config", json={
        "qos": [{"name": "bulk", "priority": 1}],
        "accounts": [{"accounts": [{"name": "bio", "description": "Biology"}]}],
        "associations": [{"account": "bio", "cluster": "itest", "user": OTHER, "shares_raw": 3, "qos": ["bulk"]}],
    }))  # fmt: skip
    dump = ok(admin.get(f"{D}/config"))
    assert "bio" in [a["name"] for a in dump["accounts"]] and "bulk" in [q["name"] for q in dump["qos"]]
    mine = [a for a in dump["associations"] if a["user"] == OTHER]
    assert [(a["account"], a["shares_raw"], a["qos"]) for a in mine] == [("bio", 3, ["bulk"])]
    ok(admin.delete(f"{D}/user/{OTHER}"))
    ok(admin.delete(f"{D}/account/bio"))
    ok(admin.delete(f"{D}/qos/bulk"))


# ---------------------------------------------------------------------------- required mode: the token's user

KEY = b"rest-accounting-test-key-0123456789abcdef"


def test_rest_job_runs_as_the_tokens_user_in_required_mode() -> None:
    """A job submitted over REST with a token runs as the token's user (uid of the job and of the
    process), whatever X-SLURM-USER-NAME claims; a token for another user is refused."""
    if os.getuid() != 0:
        pytest.skip("running a job as another user needs root")
    # The job's script lives in spurd's state dir and its output in ``work``: both must be reachable
    # by the job's user, and tmp_path's parents are 0700.
    root = Path(tempfile.mkdtemp(prefix="spur-rest-as-user-"))
    root.chmod(0o755)
    work = root / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    key = root / "jwt.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{key}"\nbroker_socket = "{root / "auth.sock"}"\n'
    c = Cluster(root, conf_extra=conf, agent_conf=True)
    c.metadata = {"authorization": "Bearer " + mint(KEY, USER, os.getuid(), now=time.time(), ttl_secs=600)}
    try:
        c.start_controller()
        c.wait_rest()
        c.start_agent("n1")
        c.wait_nodes("n1")
        nobody = pwd.getpwnam(OTHER)
        token = mint(KEY, OTHER, nobody.pw_uid, now=time.time(), ttl_secs=600)
        base = f"http://127.0.0.1:{c.rest_port}"
        job = {"script": "#!/bin/sh\nid -u\n", "job": {"name": "who", "current_working_directory": str(work),
               "standard_output": "who-%j.out", "environment": {"PATH": "/usr/bin:/bin"}}}  # fmt: skip
        # the token names the user (no X-SLURM-USER-NAME needed)
        r = httpx.post(f"{base}{S}/job/submit", headers={"Authorization": f"Bearer {token}"}, json=job)
        assert r.status_code == 200, r.text
        job_id = r.json()["job_id"]
        # a claim that disagrees with the token is an authentication failure (401, the one text that
        # names no user), and nothing is submitted
        r2 = httpx.post(f"{base}{S}/job/submit", headers={"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token},
                        json=job)  # fmt: skip
        assert r2.status_code == 401 and r2.json()["errors"][0]["error_number"] == 1007, r2.text
        assert USER not in r2.text and OTHER not in r2.text
        headers = {"X-SLURM-USER-NAME": OTHER, "X-SLURM-USER-TOKEN": token}
        info = httpx.get(f"{base}{S}/job/{job_id}", headers=headers).json()["jobs"][0]
        assert (info["user_id"], info["user_name"]) == (nobody.pw_uid, OTHER)
        wait_for(lambda: httpx.get(f"{base}{S}/job/{job_id}", headers=headers).json()["jobs"][0]["job_state"]
                 == "COMPLETED", timeout=30, what="the REST job to complete")  # fmt: skip
        out = work / f"who-{job_id}.out"
        assert out.read_text().strip() == str(nobody.pw_uid)
        assert out.stat().st_uid == nobody.pw_uid
        assert len(httpx.get(f"{base}{S}/jobs", headers=headers).json()["jobs"]) == 1
        # the same token reads accounting entities but may not change them
        assert httpx.get(f"{base}{D}/accounts", headers=headers).status_code == 200
        r3 = httpx.post(f"{base}{D}/accounts", headers=headers, json={"accounts": [{"name": "mine"}]})
        assert r3.status_code == 403 and r3.json()["errors"][0]["error_number"] == 2002, r3.text
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
