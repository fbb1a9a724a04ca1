"""REST on a Raft follower answers like the leader: writes reach the leader, a client reads its own
write back from the follower, and ping's ``mode`` is primary for the leader, backup for the others.
Three real spurctld processes on loopback (no network namespaces)."""

from __future__ import annotations

import getpass
from pathlib import Path

import httpx
import pytest

from integration.ha_harness import HACluster
from integration.harness import wait_for

pytestmark = pytest.mark.integration

S = "/slurm/v0.0.38"
HEADERS = {"X-SLURM-USER-NAME": getpass.getuser()}


def test_follower_rest_forwards_writes_and_reads_its_own_write(tmp_path: Path) -> None:
    cluster = HACluster(tmp_path, size=3)
    cluster.start()
    try:
        leader = cluster.wait_leader()
        follower = next(m for m in cluster.members if m.node_id != leader)

        def url(member, path: str) -> str:
            return f"http://127.0.0.1:{member.rest_port}{path}"

        wait_for(lambda: httpx.get(url(follower, f"{S}/ping"), headers=HEADERS).status_code == 200, timeout=20)

        def modes() -> list[str] | None:
            pings = httpx.get(url(follower, f"{S}/ping"), headers=HEADERS).json()["pings"]
            if len(pings) != 3 or any(p["ping"] != "UP" for p in pings):
                return None
            return sorted(p["mode"] for p in pings)

        assert wait_for(modes, timeout=20, what="three controllers in ping") == ["backup", "backup", "primary"]
        for i in range(5):
            r = httpx.post(
                url(follower, f"{S}/job/submit"),
                headers=HEADERS,
                json={"script": "#!/bin/sh\ntrue\n", "job": {"name": f"f{i}", "environment": {}, "hold": True,
                                                             "current_working_directory": str(tmp_path)}},
            )  # fmt: skip
            assert r.status_code == 200, r.text
            job_id = r.json()["job_id"]
            got = httpx.get(url(follower, f"{S}/job/{job_id}"), headers=HEADERS)
            assert got.status_code == 200 and got.json()["jobs"][0]["name"] == f"f{i}"
        leader_member = cluster.member(leader)
        names = {j["name"] for j in httpx.get(url(leader_member, f"{S}/jobs"), headers=HEADERS).json()["jobs"]}
        assert {f"f{i}" for i in range(5)} <= names
        r = httpx.delete(url(follower, f"{S}/job/{job_id}"), headers=HEADERS)
        assert r.status_code == 200, r.text
        state = httpx.get(url(follower, f"{S}/job/{job_id}"), headers=HEADERS).json()["jobs"][0]["job_state"]
        assert state == "CANCELLED"
        # slurmdb accounting entities too: a POST on a follower is applied by the leader and read back
        D = "/slurmdb/v0.0.38"
        for i in range(3):
            r = httpx.post(url(follower, f"{D}/accounts"), headers=HEADERS,
                           json={"accounts": [{"name": f"ha{i}", "description": f"HA {i}"}]})  # fmt: skip
            assert r.status_code == 200, r.text
            got = httpx.get(url(follower, f"{D}/account/ha{i}"), headers=HEADERS)
            assert got.status_code == 200 and got.json()["accounts"][0]["description"] == f"HA {i}"
        names = {a["name"] for a in httpx.get(url(leader_member, f"{D}/accounts"), headers=HEADERS).json()["accounts"]}
        assert {"ha0", "ha1", "ha2"} <= names
    finally:
        cluster.stop()
