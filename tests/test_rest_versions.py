"""Every REST version's answers validate against that version's unmodified document (slurmrestd
22.05's v0.0.38, 24.11's v0.0.40/41/42), and match the real servers' answers in keys and types.

The documents and the real answers are read at run time from ../shared/reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spur.rest import mapping, v004x
from spur.rest.conformance import DocumentValidator
from spur.rest.errors import body
from spur.rest.openapi import SENT_AS_NULL, VERSIONS, document, document_bytes
from spur.rest.shape import INF, SchemaShapers
from spur.rpc.proto import spur_pb2 as pb

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
V4 = VERSIONS[1:]

if not REFERENCE.is_dir():  # pragma: no cover - the references live beside the checkout
    pytest.skip(f"{REFERENCE} is missing", allow_module_level=True)


def _ref_doc(version: str) -> bytes:
    name = "slurmrestd-22.05-openapi-v0.0.38.json" if version == "v0.0.38" else f"slurmrestd-24.11-openapi-{version}.json"
    return (REFERENCE / name).read_bytes()


def _answer(version: str, name: str) -> dict[str, Any]:
    return json.loads((REFERENCE / "slurmrestd-24.11" / f"{version}_{name}.json").read_text())


def _validator(version: str) -> DocumentValidator:
    return DocumentValidator(document(version), SENT_AS_NULL[version])


def _job(state: str = "RUNNING", **spec: Any) -> pb.JobInfo:
    job = pb.JobInfo(
        job_id=2, user="root", uid=0, gid=0, group="root", state=state, reason="None", partition="debug",
        time_limit_secs=300, priority=100, submit_time=1796282544.2, eligible_time=1796282544,
    )  # fmt: skip
    job.spec.name = "resttest"
    job.spec.work_dir = "/tmp"
    for key, value in spec.items():
        setattr(job.spec, key, value)
    if state != "PENDING":
        job.start_time = 1796282544
        job.nodelist = "vm"
        job.allocation.add(node="vm", cpus=2, mem_mb=100, tasks=1)
    if state in ("COMPLETED", "CANCELLED"):
        job.end_time = 1796282600
        job.signal = 15 if state == "CANCELLED" else 0
    return job


JOBS = [
    _job(),
    _job("PENDING", cpus_per_task=2, hold=True, mem_per_cpu_mb=512, nice=5),
    _job("COMPLETED", num_tasks=2, mem_per_node_mb=1000),
    _job("CANCELLED"),
]


def _node() -> pb.NodeInfo:
    return pb.NodeInfo(name="n1", address="127.0.0.1", state="drained", cpus=4, memory_mb=1000, alloc_cpus=1,
                       sockets=1, cores_per_socket=4, threads_per_core=1, partitions=["debug"], reason="x")  # fmt: skip


def _partition() -> pb.PartitionInfo:
    return pb.PartitionInfo(name="debug", nodes=["n1"], is_default=True, max_time_secs=-1, default_time_secs=-1)


# ---------------------------------------------------------------------------- the documents


@pytest.mark.parametrize("version", VERSIONS)
def test_each_served_document_is_the_real_one_byte_for_byte(version: str) -> None:
    assert document_bytes(version) == _ref_doc(version)


def test_every_null_exception_is_where_slurmrestd_itself_sends_null() -> None:
    answers = [json.loads(p.read_text()) for p in (REFERENCE / "slurmrestd-22.05").glob("*.json")]
    schemas = document("v0.0.38")["components"]["schemas"]

    def nulls(value: Any, path: str, out: set[str]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{path}.{k}" if path else k
                if v is None:
                    out.add(sub)
                nulls(v, sub, out)
        elif isinstance(value, list):
            for v in value:
                nulls(v, path, out)

    sent: set[str] = set()
    for answer in answers:
        for key in ("jobs", "associations"):
            for item in answer.get(key, []):
                nulls(item, "", sent)
    for schema, prop in SENT_AS_NULL["v0.0.38"]:
        assert schema in schemas
        assert prop in sent, f"{schema}.{prop}: slurmrestd 22.05 never sends null there"


# ---------------------------------------------------------------------------- v0.0.38


def _v38(path: str, method: str, data: dict[str, Any]) -> dict[str, Any]:
    doc = document("v0.0.38")
    schema = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    return SchemaShapers(doc, SENT_AS_NULL["v0.0.38"], keep_undeclared=True).for_schema(schema)(data)


def test_v0038_answers_validate_against_the_unmodified_22_05_document() -> None:
    v = _validator("v0.0.38")
    # sent as the mapper writes them (the job lists skip the shaper: they are the hot path)
    jobs = body(jobs=[mapping.job_to_slurm(j, "c") for j in JOBS])
    assert v.errors("get", "/slurm/v0.0.38/jobs", 200, jobs) == []
    # a generated client parses what the document declares: cpus_per_task is a string
    assert jobs["jobs"][1]["cpus_per_task"] == "2" and jobs["jobs"][0]["cpus_per_task"] is None
    assert jobs["meta"]["Slurm"]["version"] == {"major": "22", "micro": "8", "minor": "5"}
    for path, data in (
        ("/slurm/v0.0.38/nodes", body(nodes=[mapping.node_to_slurm(_node())])),
        ("/slurm/v0.0.38/partitions", body(partitions=[mapping.partition_to_slurm(_partition(), {"n1": 4})])),
        ("/slurm/v0.0.38/ping", body(pings=mapping.pings([pb.ControllerInfo(address="a:1", role="leader", healthy=True)]))),
        ("/slurm/v0.0.38/diag", body(statistics=mapping.diag_statistics(JOBS, 1.0, 0.0, {}))),
        ("/slurmdb/v0.0.38/jobs", body(True, jobs=[mapping.job_to_slurmdb(j, "c", 1796282700) for j in JOBS])),
        ("/slurm/v0.0.38/job/submit", body(job_id=3, step_id="BATCH", job_submit_user_msg="")),
    ):
        method = "post" if path.endswith("submit") else "get"
        assert v.errors(method, path, 200, _v38(path, method, data)) == [], path


# ---------------------------------------------------------------------------- v0.0.40..42


def _v4(version: str, path: str, method: str, **fields: Any) -> dict[str, Any]:
    d = v004x.Dialect(version)
    data = dict(fields, meta=d.meta(path.startswith("/slurmdb"), "c"), errors=[], warnings=[])
    return d.response_shaper(path, method)(data)


@pytest.mark.parametrize("version", V4)
def test_v004x_answers_validate_against_the_unmodified_24_11_documents(version: str) -> None:
    v = _validator(version)
    layout = v004x.Dialect(version).job_resources_layout()
    S, D = f"/slurm/{version}", f"/slurmdb/{version}"
    cases = [
        ("get", f"{S}/jobs/", {"jobs": [v004x.job_info(j, "c", layout) for j in JOBS], "last_update": 1, "last_backfill": 1}),
        ("get", f"{S}/nodes/", {"nodes": [v004x.node(_node(), "c")], "last_update": 1}),
        ("get", f"{S}/partitions/", {"partitions": [v004x.partition(_partition(), {"n1": 4}, "c")], "last_update": 1}),
        ("get", f"{S}/ping/", {"pings": v004x.pings([pb.ControllerInfo(address="a:1", role="leader", healthy=True)])}),
        ("get", f"{S}/diag/", {"statistics": v004x.diag(mapping.diag_statistics(JOBS, 1.0, 0.0, {}))}),
        ("get", f"{D}/jobs/", {"jobs": [v004x.db_job(j, "c", 1796282700) for j in JOBS]}),
        ("post", f"{S}/job/submit", {"job_id": 3, "step_id": "batch", "job_submit_user_msg": ""}),
    ]
    for method, path, fields in cases:
        shaped = _v4(version, path, method, **fields)
        assert v.errors(method, path, 200, shaped) == [], path
        assert shaped["meta"]["plugin"]["data_parser"] == f"data_parser/{version}"


def same_keys_and_types(ours: Any, theirs: Any, path: str = "$") -> list[str]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        diffs = [f"{path}.{k}: missing" for k in theirs if k not in ours]
        return diffs + [d for k in theirs if k in ours for d in same_keys_and_types(ours[k], theirs[k], f"{path}.{k}")]
    if isinstance(theirs, list) and isinstance(ours, list):
        return same_keys_and_types(ours[0], theirs[0], f"{path}[0]") if ours and theirs else []
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return [] if type(ours) is type(theirs) else [f"{path}: {type(ours).__name__} != {type(theirs).__name__}"]
    if isinstance(theirs, int | float) and isinstance(ours, int | float):
        return []
    return [] if type(ours) is type(theirs) else [f"{path}: {type(ours).__name__} != {type(theirs).__name__}"]


@pytest.mark.parametrize("version", V4)
def test_v004x_jobs_nodes_and_pings_have_the_real_servers_keys_and_types(version: str) -> None:
    layout = v004x.Dialect(version).job_resources_layout()
    done = _job("COMPLETED")
    job = _v4(version, f"/slurm/{version}/job/{{job_id}}", "get", jobs=[v004x.job_info(done, "c", layout)])
    real = _answer(version, "slurm_job_done")["response"]["jobs"][0]
    ours = job["jobs"][0]
    if layout == "nodes":  # left out on purpose (docs/rest.md): its schema requires "nodes/count"
        real = {k: v for k, v in real.items() if k != "job_resources"}
    diffs = same_keys_and_types(ours, real)
    assert diffs == [], diffs
    assert ours["job_state"] == ["COMPLETED"] and ours["time_limit"] == {"set": True, "infinite": False, "number": 5}
    nodes = _v4(version, f"/slurm/{version}/nodes/", "get", nodes=[v004x.node(_node(), "c")])
    real_node = _answer(version, "slurm_nodes")["response"]["nodes"][0]
    assert same_keys_and_types(nodes["nodes"][0], real_node) == []
    assert nodes["nodes"][0]["state"] == ["IDLE", "DRAIN"]
    ping = _v4(version, f"/slurm/{version}/ping/", "get",
               pings=v004x.pings([pb.ControllerInfo(address="a:1", role="leader", healthy=True)]))  # fmt: skip
    assert same_keys_and_types(ping["pings"][0], _answer(version, "slurm_ping")["response"]["pings"][0]) == []


def test_number_objects_flags_and_nulls_follow_the_schema() -> None:
    d = v004x.Dialect("v0.0.42")
    shaper = d.shapers.named("v0.0.42_job_info")
    out = shaper({"time_limit": INF, "array_task_id": None, "priority": 7, "job_state": "RUNNING",
                  "not_a_field": 1, "nice": None, "billable_tres": 2})  # fmt: skip
    assert out == {
        "time_limit": {"set": False, "infinite": True, "number": 0},
        "array_task_id": {"set": False, "infinite": False, "number": 0},
        "priority": {"set": True, "infinite": False, "number": 7},
        "job_state": ["RUNNING"],
        "billable_tres": {"set": True, "infinite": False, "number": 2.0},
    }


@pytest.mark.parametrize("version", V4)
def test_v004x_submit_bodies_map_to_the_v0038_rules(version: str) -> None:
    body_ = {"job": {"script": "#!/bin/sh\ntrue\n", "name": "x", "environment": ["PATH=/bin"], "argv": ["a", "b"],
                     "current_working_directory": "/tmp", "cpus_per_task": 2,
                     "time_limit": {"set": True, "number": 5}, "hold": True}}  # fmt: skip
    spec = v004x.submit_body_to_spec(body_, "/home/x", "_job_post")
    assert spec.time_limit_secs == 300 and spec.cpus_per_task == 2 and list(spec.argv) == ["a", "b"]
    assert spec.environment["PATH"] == "/bin" and spec.hold and spec.work_dir == "/tmp"
    with pytest.raises(Exception) as err:
        v004x.submit_body_to_spec({"job": {"name": "x"}}, "/home/x", "_job_post")
    assert err.value.status == 422 and err.value.error_number == 9000  # type: ignore[attr-defined]
    unlimited = v004x.submit_body_to_spec(
        {"script": "#!/bin/sh\n", "job": {"time_limit": {"infinite": True}}}, "/h", "_job_post"
    )
    assert unlimited.time_limit_secs == -1
