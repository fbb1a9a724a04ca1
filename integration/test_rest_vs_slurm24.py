"""Spur's REST answers side by side with a real slurmrestd 24.11's, for v0.0.40, v0.0.41 and v0.0.42.

Both clusters get the same state: one node with the same CPUs and memory, a default partition
``debug``, the ``root`` account and user (and an account ``physics``), one completed job, one
running and one held job submitted through each one's own REST API. Every read operation below is then asked of both, once, at one moment (the real
slurmctld forgets a finished job 30 s after it ends: ``MinJobAge=30``), and each (version, operation)
is one test comparing the two answers with :func:`spur.rest.shapediff.shape_diff`: same keys, same
JSON types, same nesting, and the same values except under :data:`UNEQUAL`. What still differs is
listed in :data:`KNOWN`, each with its reason (docs/rest.md, "Where Spur differs"); a listed
difference that no longer occurs fails too, so the table stays true.

The real cluster is ``shared/tools/slurm24-chroot.sh`` (see integration/slurm24.py); without it beside
the clone the module is skipped, saying so.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration import slurm24
from integration.conftest import _cleanup_jobs
from integration.harness import Cluster, wait_for
from spur.rest.conformance import DocumentValidator
from spur.rest.openapi import SENT_AS_NULL, document
from spur.rest.shapediff import Difference, generic_path, shape_diff

# the first test also waits for the chroot's lock, and on a fresh machine for its build (2 minutes)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")

# name -> path (``{v}``: the version; ``{done}``, ``{run}``, ``{held}``: each side's job ids; ``{node}``)
ENDPOINTS: dict[str, str] = {
    "slurm ping": "/slurm/{v}/ping/",
    "slurm diag": "/slurm/{v}/diag/",
    "slurm jobs": "/slurm/{v}/jobs/",
    "slurm jobs/state": "/slurm/{v}/jobs/state/",
    "slurm job done": "/slurm/{v}/job/{done}",
    "slurm job held": "/slurm/{v}/job/{held}",
    "slurm job running": "/slurm/{v}/job/{run}",
    "slurm nodes": "/slurm/{v}/nodes/",
    "slurm node": "/slurm/{v}/node/{node}",
    "slurm partitions": "/slurm/{v}/partitions/",
    "slurm partition": "/slurm/{v}/partition/debug",
    "slurm reservations": "/slurm/{v}/reservations/",
    "slurm licenses": "/slurm/{v}/licenses/",
    "slurm shares": "/slurm/{v}/shares",
    "slurmdb ping": "/slurmdb/{v}/ping/",
    "slurmdb diag": "/slurmdb/{v}/diag/",
    "slurmdb accounts": "/slurmdb/{v}/accounts/",
    "slurmdb account": "/slurmdb/{v}/account/root",
    "slurmdb associations": "/slurmdb/{v}/associations/",
    "slurmdb users": "/slurmdb/{v}/users/",
    "slurmdb user": "/slurmdb/{v}/user/root",
    "slurmdb qos": "/slurmdb/{v}/qos/",
    "slurmdb qos normal": "/slurmdb/{v}/qos/normal",
    "slurmdb tres": "/slurmdb/{v}/tres/",
    "slurmdb clusters": "/slurmdb/{v}/clusters/",
    "slurmdb config": "/slurmdb/{v}/config",
    "slurmdb jobs": "/slurmdb/{v}/jobs/",
    "slurmdb job done": "/slurmdb/{v}/job/{done}",
    "slurmdb job running": "/slurmdb/{v}/job/{run}",
    "slurmdb wckeys": "/slurmdb/{v}/wckeys/",
}

# Values that legitimately differ between two clusters (compared by shape and number-object form
# only). A key name covers that key anywhere; a path covers that place only.
UNEQUAL: dict[str, str] = {
    "job_id": "each cluster numbers its jobs (the chroot's ids also grow from run to run)",
    "association_id": "ids the accounting database assigned",
    "submit_time": "clock times",
    "eligible_time": "clock times",
    "accrue_time": "clock times",
    "start_time": "clock times",
    "end_time": "clock times",
    "last_sched_evaluation": "clock times",
    "last_update": "clock times",
    "last_backfill": "clock times",
    "time": "clock times and durations (slurmdb jobs, steps)",
    "boot_time": "clock times",
    "slurmd_start_time": "clock times",
    "last_busy": "clock times",
    "req_time_start": "clock times",
    "job_states_ts": "clock times",
    "time_start": "clock times",
    "cluster": "the cluster names differ (anchor24, itest)",
    "cluster_name": "the cluster names differ",
    "meta.slurm.cluster": "the cluster names differ",
    "clusters[].name": "the cluster names differ",
    "meta.client.source": "the client's address and socket",
    "meta.slurm.version": "the Debian package's point release may move",
    "meta.slurm.release": "the Debian package's point release may move",
    "version": "a node's daemon version (Slurm's, Spur's)",
    "operating_system": "the kernel line each daemon read",
    "address": "the node's address (the chroot's host name, Spur's 127.0.0.1)",
    "hostname": "host names",
    "port": "the daemons' ports",
    "pid": "process ids",
    "standard_output": "each side's job writes to its own working directory",
    "standard_error": "each side's job writes to its own working directory",
    "cpu_load": "the machine's load at the moment",
    "free_mem": "the machine's free memory at the moment",
    "latency": "a measured round trip",
    "statistics": "the daemons' own counters (diag)",
    "priority": "each scheduler's priority plugin (Spur's counts down from Slurm's priority/basic start)",
    "stdout_expanded": "the expanded output file names contain the job id",
    "jobs[].steps[].step.id": "a step id contains the job id",
    "associations[].id": "ids the accounting database assigned",
    "users[].associations[].id": "ids the accounting database assigned",
    "jobs[].association.id": "ids the accounting database assigned",
}

# Differences still left (docs/rest.md, "Where Spur differs from real slurmrestd"): (operation,
# path without list positions) -> the reason; the path covers everything below it. An operation
# written ``name@v0.0.41,v0.0.42`` applies to those versions only.
_JOB_LISTS = ("slurm jobs", "slurm job done", "slurm job held", "slurm job running")
_DB_JOBS = ("slurmdb jobs", "slurmdb job done", "slurmdb job running")
_NO_MEMORY_DEFAULT = "Slurm without DefMemPerCPU requests the node's whole memory; Spur requests none"
KNOWN: dict[tuple[str, str], str] = {
    **{(op, "jobs[].tres_req_str"): _NO_MEMORY_DEFAULT for op in _JOB_LISTS},
    **{(op, "jobs[].flags"): "Spur writes the default account into the job's request at submission, so "
       "it cannot tell USING_DEFAULT_ACCOUNT" for op in _JOB_LISTS},
    **{(f"{op}@v0.0.41,v0.0.42", "jobs[].job_resources"): "24.11's v0.0.41/42 documents require slash-named "
       "keys (nodes/count) where the server sends objects, and declare no null: left out" for op in _JOB_LISTS
       if op != "slurm job done"},
    ("slurm job done@v0.0.41,v0.0.42", "jobs[].job_resources"):
        "24.11's v0.0.41/42 documents require slash-named keys (nodes/count): left out",
    **{(f"{op}@v0.0.40", "jobs[].job_resources.allocated_nodes[].sockets"): "which socket and core a job "
       "got: Spur does not place jobs on cores, and the real node counts each CPU as a socket"
       for op in ("slurm jobs", "slurm job running")},
    ("slurm jobs/state", "jobs[].job_id"): "the documents declare job_info's integer here; 24.11 sends a string",
    ("slurm jobs/state", "last_backfill"): "the documents require it (job_info_resp); 24.11 leaves it out",
    ("slurm jobs/state", "last_update"): "the documents require it (job_info_resp); 24.11 leaves it out",
    ("slurm nodes", "nodes[].cores"): "slurm.conf names only CPUs=, so slurmctld counts each CPU as a socket; spurd reports the machine's",
    ("slurm nodes", "nodes[].sockets"): "slurm.conf names only CPUs=, so slurmctld counts each CPU as a socket; spurd reports the machine's",
    ("slurm node", "nodes[].cores"): "slurm.conf names only CPUs=, so slurmctld counts each CPU as a socket; spurd reports the machine's",
    ("slurm node", "nodes[].sockets"): "slurm.conf names only CPUs=, so slurmctld counts each CPU as a socket; spurd reports the machine's",
    ("slurm shares", "shares.shares"): "Spur does not list its fair-share tree here (an empty list)",
    **{(op, "clusters[].flags"): "slurmctld's registration flags; Spur's cluster record has none"
       for op in ("slurmdb clusters", "slurmdb config")},
    **{(op, path): "Spur defines gres/gpu as a TRES (id 1001); slurmdbd without GRES lists its dynamic_offset"
       for op, path in (("slurmdb tres", "TRES[]"), ("slurmdb config", "tres[]"))},
    **{(op, "users[].default.account"): "slurmdbd's own root user has no default account; Spur's is root"
       for op in ("slurmdb users", "slurmdb user")},
    ("slurmdb diag", "statistics.rollups"):
        "24.11's documents require slash-named keys (hourly/count) where the server sends objects: left out",
    ("slurmdb config", "accounts[].associations"): "slurmdbd's config lists the associations of the accounts "
        "added after the cluster registered (not root's); Spur's config lists no account's",
    ("slurmdb wckeys", "warnings"): "24.11 warns that it found nothing (naming a pointer); Spur keeps no WCKeys",
    **{(op, "jobs[].tres"): f"{_NO_MEMORY_DEFAULT}; slurmdbd adds energy (-2: not gathered)" for op in _DB_JOBS},
    ("slurmdb jobs", "jobs"): "slurmdbd records a held job once it is eligible; Spur lists it at once",
}


@dataclass
class Side:
    """One cluster's REST client and the ids of the jobs this run submitted."""

    http: httpx.Client
    node: str
    done: int = 0
    run: int = 0
    held: int = 0
    validator: Callable[[str], DocumentValidator] | None = None
    since: float = 0.0  # when this run began (epoch seconds)


@dataclass
class Answer:
    """One answer: its status, its body (only this run's jobs in a job list) and, for Spur's, how
    it breaks the version's document (none expected)."""

    status: int
    body: Any
    document_errors: list[str]


@dataclass
class Answers:
    """Every (version, operation)'s answer from both sides, taken at one moment."""

    real: dict[tuple[str, str], Answer] = field(default_factory=dict)
    spur: dict[tuple[str, str], Answer] = field(default_factory=dict)


def _submit(http: httpx.Client, cwd: str, **job: Any) -> int:
    job.setdefault("environment", ["PATH=/usr/bin:/bin"])
    job.setdefault("current_working_directory", cwd)
    r = http.post("/slurm/v0.0.42/job/submit", json={"job": job})
    assert r.status_code == 200, r.text
    job_id: int = r.json()["job_id"]
    return job_id


def _state(http: httpx.Client, job_id: int) -> list[str]:
    state: list[str] = http.get(f"/slurm/v0.0.42/job/{job_id}").json()["jobs"][0]["job_state"]
    return state


def _recorded(http: httpx.Client, job_id: int) -> bool:
    r = http.get(f"/slurmdb/v0.0.42/job/{job_id}")
    return r.status_code == 200 and "COMPLETED" in r.json()["jobs"][0]["state"]["current"]


def _accounts(side: Side) -> None:
    """The account ``physics`` under ``root``, with ``root`` as a user of it, through slurmdbd's
    REST calls (the chroot's database keeps them from an earlier run: then nothing is added)."""
    def present(user: str) -> bool:
        r = side.http.get("/slurmdb/v0.0.42/associations/", params={"account": "physics"})
        return r.status_code == 200 and any(a["user"] == user for a in r.json()["associations"])

    for user, path, body in (
        ("", "accounts_association/", {"association_condition": {"accounts": ["physics"]},
                                       "account": {"description": "Physics", "organization": "science"}}),
        ("root", "users_association/", {"association_condition": {"users": ["root"], "accounts": ["physics"]},
                                        "user": {}}),
    ):  # fmt: skip
        if not present(user):
            r = side.http.post(f"/slurmdb/v0.0.42/{path}", json=body)
            assert r.status_code == 200, (str(side.http.base_url), path, r.status_code, r.text[-400:])
            assert present(user), (path, r.text)


def _submit_jobs(side: Side, cwd: str) -> None:
    """A job that completes, one that runs (until cancelled) and a held one on ``side``."""
    side.done = _submit(side.http, cwd, name="cmp-done", script="#!/bin/sh\ntrue\n")
    side.run = _submit(side.http, cwd, name="cmp-run", script="#!/bin/sh\nsleep 600\n", standard_output="/dev/null")
    side.held = _submit(side.http, cwd, name="cmp-held", script="#!/bin/sh\ntrue\n", hold=True)


def _settled(side: Side) -> None:
    """Wait until ``side``'s first job is COMPLETED and recorded in the accounting (slurmdb); the
    second RUNNING, the held one PENDING."""
    wait_for(lambda: "COMPLETED" in _state(side.http, side.done), timeout=60, what=f"job {side.done}")
    wait_for(lambda: "RUNNING" in _state(side.http, side.run), timeout=60, what=f"job {side.run} to run")
    wait_for(lambda: _recorded(side.http, side.done), timeout=60, what=f"job {side.done} in slurmdb")
    assert _state(side.http, side.held) == ["PENDING"]


# entity lists whose order is each server's own: compared in the order of these fields
_ORDER = {"accounts": ("name",), "users": ("name",), "associations": ("account", "user", "partition")}


def _ours(body: Any, ids: tuple[int, ...], since: float) -> Any:
    """``body`` with only this run's jobs in its ``jobs`` list, in the order of ``ids`` (the
    chroot's slurmctld and database keep earlier runs' jobs), without associations' usage records of
    periods that began before ``since`` (slurmdbd's rollups of earlier runs' jobs: Spur's database is
    new each run, and a run's own jobs end inside a period neither side has rolled up), and its
    entity lists in one order."""
    if not isinstance(body, dict):
        return body
    if isinstance(body.get("associations"), list):
        body = dict(body, associations=[_this_run_usage(a, since) for a in body["associations"]])
    if isinstance(body.get("jobs"), list):
        order = {str(job_id): i for i, job_id in enumerate(ids)}
        jobs = [j for j in body["jobs"] if str(j.get("job_id")) in order]
        body = dict(body, jobs=sorted(jobs, key=lambda j: order[str(j["job_id"])]))
    for key, fields in _ORDER.items():
        if isinstance(body.get(key), list):
            body = dict(body, **{key: sorted(body[key], key=lambda x: tuple(str(x.get(f)) for f in fields))})
    return body


def _this_run_usage(association: Any, since: float) -> Any:
    """``association`` without the ``accounting`` records (rolled-up usage) of periods that began
    before ``since``."""
    records = association.get("accounting") if isinstance(association, dict) else None
    if not isinstance(records, list):
        return association
    kept = [
        r for r in records if not (isinstance(r, dict) and isinstance(r.get("start"), int) and r["start"] < since)
    ]
    return dict(association, accounting=kept)


def _take(side: Side, version: str, name: str, path: str) -> Answer:
    """The answer to ``GET path`` on ``side``; Spur's is also checked against the version's document
    (what Spur promises besides matching the real server)."""
    concrete = path.format(v=version, done=side.done, run=side.run, held=side.held, node=side.node)
    r = side.http.get(concrete)
    assert r.headers.get("content-type", "").startswith("application/json"), (name, r.status_code, r.text[:300])
    errors = side.validator(version).errors("get", concrete, r.status_code, r.json()) if side.validator else []
    return Answer(r.status_code, _ours(r.json(), (side.done, side.run, side.held), side.since), errors)


@functools.cache
def _validator(version: str) -> DocumentValidator:
    return DocumentValidator(document(version), SENT_AS_NULL[version])


def _declared(version: str, path: str) -> bool:
    template = path.replace("{v}", version)
    for job in ("{done}", "{run}", "{held}"):
        template = template.replace(job, "{job_id}")
    template = template.replace("{node}", "{node_name}").replace("/debug", "/{partition_name}")
    template = template.replace("/account/root", "/account/{account_name}").replace("/user/root", "/user/{name}")
    template = template.replace("/qos/normal", "/qos/{qos}")
    return template in document(version)["paths"]


CASES = [(v, name) for v in VERSIONS for name, path in ENDPOINTS.items() if _declared(v, path)]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Answers]:
    reason = slurm24.why_unavailable()
    if reason is not None:
        pytest.skip(f"no real Slurm 24.11: {reason}")
    began = time.time()
    with slurm24.real_slurm24() as real:
        real_http = real.http()
        node = real_http.get("/slurm/v0.0.42/nodes/").json()["nodes"][0]
        root = tmp_path_factory.mktemp("vs24")
        os.chmod(root, 0o755)
        cluster = Cluster(root, conf_extra='[[partitions]]\nname = "debug"\ndefault = true\nnodes = "ALL"\n')
        sides: dict[str, Side] = {}
        try:
            cluster.start_controller()
            cluster.wait_rest()
            # the real node's name, CPUs and memory: the node answers compare by value
            cluster.start_agent(node["name"], cpus=node["cpus"], memory_mb=node["real_memory"])
            cluster.wait_nodes(node["name"])
            spur_http = httpx.Client(base_url=f"http://127.0.0.1:{cluster.rest_port}",
                                     headers={"X-SLURM-USER-NAME": "root"}, timeout=30)  # fmt: skip
            spur_side = Side(spur_http, node["name"], validator=_validator, since=began)
            sides = {"real": Side(real_http, node["name"], since=began), "spur": spur_side}
            # both in /tmp (the chroot's, the machine's): the working directories compare by value.
            # Spur's first, then the real ones, answers taken at once: slurmctld forgets the
            # completed job 30 s after it ends
            _accounts(sides["spur"])
            _accounts(sides["real"])
            _submit_jobs(sides["spur"], "/tmp")
            _settled(sides["spur"])
            _submit_jobs(sides["real"], "/tmp")
            _settled(sides["real"])
            out = Answers()
            for version, name in CASES:
                out.real[version, name] = _take(sides["real"], version, name, ENDPOINTS[name])
                out.spur[version, name] = _take(sides["spur"], version, name, ENDPOINTS[name])
            yield out
        finally:
            real.run("scancel", "-u", "root", check=False)  # this run's jobs, and any a failed run left
            if "spur" in sides:
                for job_id in (sides["spur"].run, sides["spur"].held):
                    if job_id:
                        sides["spur"].http.delete(f"/slurm/v0.0.42/job/{job_id}")
                Path(f"/tmp/slurm-{sides['spur'].done}.out").unlink(missing_ok=True)
            if sides.get("real") and sides["real"].done:  # the chroot's /tmp is in the machine's cache
                real.run("rm", "-f", f"/tmp/slurm-{sides['real'].done}.out", check=False)
            real_http.close()
            cluster.stop()
            _cleanup_jobs(cluster)  # a job's processes outlive its agent by design


def known_for(version: str, name: str) -> dict[str, str]:
    """The :data:`KNOWN` entries of one case: generic path -> reason."""
    out = {}
    for (where, path), reason in KNOWN.items():
        op, _, versions = where.partition("@")
        if op == name and (not versions or version in versions.split(",")):
            out[path] = reason
    return out


def _under(path: str, known: str) -> bool:
    """``path`` is ``known`` or a key below it (``jobs[].tres.allocated[].count`` is under
    ``jobs[].tres``; ``jobs[].name`` is not under ``jobs``, a list's length)."""
    return path == known or path.startswith(f"{known}.")


def explain(diffs: list[Difference]) -> str:
    return "\n".join(f"  {d}" for d in diffs)


@pytest.mark.parametrize(("version", "name"), CASES, ids=[f"{v}-{n.replace(' ', '_')}" for v, n in CASES])
def test_spur_answers_as_real_slurmrestd_24_11(answers: Answers, version: str, name: str) -> None:
    real, spur = answers.real[version, name], answers.spur[version, name]
    assert spur.document_errors == [], f"Spur's answer breaks the {version} document: {spur.document_errors[:5]}"
    assert spur.status == real.status, (real.status, spur.status, spur.body)
    diffs = shape_diff(real.body, spur.body, UNEQUAL)
    known = known_for(version, name)
    left = [d for d in diffs if not any(_under(generic_path(d.path), k) for k in known)]
    stale = sorted(k for k in known if not any(_under(generic_path(d.path), k) for d in diffs))
    assert not left, f"{version} {name}: Spur differs from slurmrestd 24.11 at\n{explain(left)}"
    assert not stale, f"{version} {name}: listed in KNOWN but no longer different (remove them): {stale}"


def test_the_known_differences_name_real_operations() -> None:
    for (where, _), reason in KNOWN.items():
        assert where.partition("@")[0] in ENDPOINTS and reason, where


def test_the_tool_is_found_beside_the_clone() -> None:
    """CI lays shared/ beside the clone: there the module must run, not skip."""
    if not Path(slurm24.tool_path()).parent.parent.is_dir():
        pytest.skip("no shared/ beside the clone (a checkout outside CI)")
    assert slurm24.tool_path().is_file()
