"""Pure parts of the REST layer: limits, auth headers, error mapping, JSON <-> proto, the document."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from spur.auth.identity import Identity
from spur.rest import mapping
from spur.rest.auth import metadata_from_headers
from spur.rest.errors import AUTHENTICATION_FAILED, RestError, from_rpc_error
from spur.rest.limits import Limits, decode_body
from spur.rest.openapi import VERSIONS, document_bytes
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

FIXTURES = Path(__file__).parent / "fixtures" / "slurmrestd"
ALICE = Identity(1000, 1000, "alice", "users")


def resolve(name: str) -> Identity | None:
    return ALICE if name in ("alice", "1000") else None


# ---------------------------------------------------------------------------- limits


@pytest.mark.parametrize(
    ("raw", "status", "text"),
    [
        (b"x" * 2000, 413, "larger than the limit of 1024"),
        (b"", 400, "empty"),
        (b"{", 400, "invalid JSON"),
        (b"\xff", 400, "not UTF-8"),
        (b"[1]", 400, "must be a JSON object"),
        (b'{"a":' * 10 + b"1" + b"}" * 10, 400, "deeper than 4"),
        (json.dumps({"s": "y" * 300}).encode(), 400, "longer than the limit of 200"),
        (json.dumps({"k" * 300: 1}).encode(), 400, "longer than the limit of 200"),
    ],
)
def test_decode_body_refuses_what_is_over_a_limit(raw: bytes, status: int, text: str) -> None:
    with pytest.raises(RestError) as info:
        decode_body(raw, Limits(max_body_bytes=1024, max_depth=4, max_string=200), "src")
    assert info.value.status == status and text in info.value.description
    assert info.value.entry()["source"] == "src"


def test_decode_body_survives_pathological_nesting() -> None:
    with pytest.raises(RestError) as info:
        decode_body(b"[" * 200000 + b"]" * 200000, Limits(max_body_bytes=10**6), "s")
    assert info.value.status == 400


def test_decode_body_accepts_a_normal_object() -> None:
    assert decode_body(b'{"script": "x", "job": {"a": [1, 2]}}', Limits(), "s") == {
        "script": "x",
        "job": {"a": [1, 2]},
    }


# ---------------------------------------------------------------------------- auth headers


def _jwt(claims: dict) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256'})}.{part(claims)}.c2ln"


def test_slurm_headers_give_the_claimed_identity_and_the_token() -> None:
    md = metadata_from_headers({"X-SLURM-USER-NAME": "alice", "X-SLURM-USER-TOKEN": "tok"}, resolve, "s")
    assert md == {
        "x-spur-uid": "1000",
        "x-spur-gid": "1000",
        "x-spur-user": "alice",
        "x-spur-group": "users",
        "authorization": "Bearer tok",
    }


def test_bearer_token_names_the_user_by_its_sun_claim() -> None:
    token = _jwt({"sun": "alice", "exp": 1})
    md = metadata_from_headers({"authorization": f"Bearer {token}"}, resolve, "s")
    assert md["x-spur-user"] == "alice" and md["authorization"] == f"Bearer {token}"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-SLURM-USER-NAME": "mallory"},
        {"X-SLURM-USER-NAME": "alice", "X-SLURM-USER-TOKEN": _jwt({"sun": "mallory", "exp": 1})},
        {"X-SLURM-USER-NAME": "mallory", "X-SLURM-USER-TOKEN": _jwt({"sun": "alice", "exp": 1})},
        {"Authorization": f"Bearer {_jwt({'sun': 'mallory', 'exp': 1})}"},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": "Basic x"},
        {"X-SLURM-USER-NAME": "alice", "X-SLURM-USER-TOKEN": "x" * 20000},
    ],
)
def test_every_authentication_failure_is_the_same_401(headers: dict) -> None:
    """Whatever is wrong, the answer is one text that never says whether the user exists."""
    with pytest.raises(RestError) as info:
        metadata_from_headers(headers, resolve, "s")
    assert (info.value.status, info.value.error_number) == (401, 1007)
    assert info.value.description == AUTHENTICATION_FAILED
    assert "mallory" not in info.value.description and "alice" not in info.value.description


# ---------------------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("code", "message", "status", "number"),
    [
        (StatusCode.NOT_FOUND, "Invalid job id specified", 404, 2017),
        (StatusCode.INVALID_ARGUMENT, "invalid partition name specified", 400, 2000),
        (StatusCode.PERMISSION_DENIED, "Access/permission denied", 403, 2002),
        (StatusCode.FAILED_PRECONDITION, "Job/step already completing or completed", 409, 2021),
        (StatusCode.NOT_FOUND, "Node zz not found", 404, 2018),
        (StatusCode.INVALID_ARGUMENT, "something odd", 400, -1),
    ],
)
def test_rpc_errors_become_slurm_errors(code: StatusCode, message: str, status: int, number: int) -> None:
    err = from_rpc_error(RpcError(code, message), "src")
    assert (err.status, err.error_number, err.description) == (status, number, message)


def test_a_refused_credential_is_the_same_401() -> None:
    err = from_rpc_error(RpcError(StatusCode.UNAUTHENTICATED, "invalid credential: bad signature"), "src")
    assert (err.status, err.error_number, err.description) == (401, 1007, AUTHENTICATION_FAILED)


# ---------------------------------------------------------------------------- submit and update


def test_submit_body_maps_to_a_job_spec() -> None:
    spec = mapping.submit_to_spec(
        {
            "script": "#!/bin/bash\nsrun hostname\n",
            "job": {
                "name": "n",
                "environment": {"A": "1", "B": 2},
                "current_working_directory": "/work",
                "partition": "gpu",
                "nodes": [2, 4],
                "tasks": 8,
                "cpus_per_task": 2,
                "memory_per_node": 4096,
                "time_limit": 90,
                "array": "0-3%2",
                "account": "acct",
                "qos": "high",
                "standard_output": "o-%j",
                "standard_error": "e-%j",
                "requeue": False,
                "hold": True,
                "exclusive": "user",
                "constraints": "a100&ib",
                "gpus": "a100:2",
            },
        },
        "/home/alice",
    )
    assert spec.script.startswith("#!/bin/bash") and spec.name == "n"
    assert dict(spec.environment) == {"A": "1", "B": "2"} and spec.work_dir == "/work"
    assert (spec.num_nodes, spec.num_tasks, spec.cpus_per_task, spec.mem_per_node_mb) == (2, 8, 2, 4096)
    assert spec.time_limit_secs == 90 * 60 and spec.array == "0-3%2" and spec.partition == "gpu"
    assert (spec.account, spec.qos, spec.stdout_pattern, spec.stderr_pattern) == ("acct", "high", "o-%j", "e-%j")
    assert spec.no_requeue and spec.hold and spec.exclusive
    assert list(spec.constraint) == ["a100", "ib"] and spec.gpus_total == 2


def test_submit_defaults_the_working_directory_to_the_users_home() -> None:
    spec = mapping.submit_to_spec({"script": "#!/bin/sh\ntrue\n", "job": {"environment": ["X=1"]}}, "/home/alice")
    assert spec.work_dir == "/home/alice" and dict(spec.environment) == {"X": "1"}


@pytest.mark.parametrize(
    ("body", "number", "text"),
    [
        ({"job": {"environment": {}}}, 2009, "script must be set"),
        ({"script": "echo hi", "job": {"environment": {}}}, 2009, ""),
        ({"script": "#!/bin/sh\n", "jobs": [{}]}, 2036, "heterogeneous"),
        ({"script": "#!/bin/sh\n", "job": {}}, 9002, "environment must be set"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {}, "tasks": 2**40}}, 9202, "job.tasks"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {}, "hold": "yes"}}, 9202, "job.hold"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {}, "nodes": 0}}, 9202, "job.nodes"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {}, "current_working_directory": "rel"}}, 9202, "absolute"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {}, "array": "x-y"}}, 9202, "job.array"),
        ({"script": "#!/bin/sh\n", "job": {"environment": {"A=B": "1"}}}, 9202, "environment"),
        ({"script": 5, "job": {"environment": {}}}, 9202, "script"),
    ],
)
def test_bad_submit_bodies_are_400_with_slurm_numbers(body: dict, number: int, text: str) -> None:
    with pytest.raises(RestError) as info:
        mapping.submit_to_spec(body, "/")
    assert info.value.status == 400 and info.value.error_number == number
    assert text in info.value.description


def test_update_body_maps_to_an_update_request() -> None:
    req = mapping.update_to_request(12, 3, {"time_limit": 0, "hold": True, "nice": 5, "name": "x"})
    assert req.job_id == 12 and req.array_task_id == 3 and req.time_limit_secs == -1
    assert req.action == "hold" and req.nice == 5 and req.name == "x"
    assert mapping.update_to_request(1, None, {"hold": False}).action == "release"


def test_job_ids_and_signals() -> None:
    assert mapping.parse_job_id("12", "s") == (12, None)
    assert mapping.parse_job_id("12_3", "s") == (12, 3)
    for bad in ("0", "-1", "x", "12_", "1" * 30, "12_x"):
        with pytest.raises(RestError) as info:
            mapping.parse_job_id(bad, "s")
        assert info.value.status == 404 and info.value.error_number == 2017
    assert mapping.parse_signal(None, "s") == 9
    assert mapping.parse_signal("USR1", "s") == 10 and mapping.parse_signal("SIGTERM", "s") == 15
    with pytest.raises(RestError):
        mapping.parse_signal("NOPE", "s")


# ---------------------------------------------------------------------------- responses


def _job() -> pb.JobInfo:
    job = pb.JobInfo(
        job_id=2, user="root", uid=0, gid=0, group="root", state="RUNNING", reason="None", partition="debug",
        time_limit_secs=300, priority=100, nodelist="vm", submit_time=1796282544.2, start_time=1796282544,
        eligible_time=1796282544,
    )  # fmt: skip
    job.spec.name = "resttest"
    job.spec.work_dir = "/tmp"
    job.allocation.add(node="vm", cpus=1, mem_mb=0, tasks=1)
    return job


def test_job_json_has_slurmrestds_fields_and_types() -> None:
    ref = json.loads((FIXTURES / "slurm_job_2.json").read_text())["jobs"][0]
    ours = mapping.job_to_slurm(_job(), "anchor")
    assert list(ours) == list(ref), "same fields in the same order"
    for key, value in ref.items():
        if value is not None and ours[key] is not None:
            assert type(ours[key]) is type(value), key
    assert ours["time_limit"] == 5 and ours["job_state"] == "RUNNING" and ours["submit_time"] == 1796282544
    assert ours["job_resources"]["allocated_nodes"][0]["nodename"] == "vm"
    assert ours["tres_req_str"] == "cpu=1,node=1,billing=1"


def test_pings_follow_raft_roles() -> None:
    pings = mapping.pings(
        [
            pb.ControllerInfo(node_id=1, address="ctl1:6817", role="leader", healthy=True),
            pb.ControllerInfo(node_id=2, address="ctl2:6817", role="follower", healthy=True),
            pb.ControllerInfo(node_id=3, address="ctl3:6817", role="unreachable", healthy=False),
        ]
    )
    assert [(p["hostname"], p["ping"], p["mode"]) for p in pings] == [
        ("ctl1", "UP", "primary"),
        ("ctl2", "UP", "backup"),
        ("ctl3", "DOWN", "backup"),
    ]


def test_slurmdb_job_and_filter() -> None:
    job = _job()
    job.state = "COMPLETED"
    job.end_time = 1796282600
    row = mapping.job_to_slurmdb(job, "anchor", 1796282700)
    assert row["state"] == {"current": "COMPLETED", "reason": "None"} and row["time"]["elapsed"] == 56
    assert row["exit_code"] == {"status": "SUCCESS", "return_code": 0}
    keep = mapping.slurmdb_job_filter({"state": "completed", "partition": "debug,other"})
    assert keep(job)
    assert not mapping.slurmdb_job_filter({"job_name": "other"})(job)


# ---------------------------------------------------------------------------- the document


def test_served_documents_are_the_shipped_files() -> None:
    from importlib import resources

    for version in VERSIONS:
        shipped = resources.files("spur.rest").joinpath(f"slurmrestd-openapi-{version}.json").read_bytes()
        assert document_bytes(version) == shipped
        assert json.loads(shipped)["paths"], version


# ---------------------------------------------------------------------------- slurmdb entities


def test_association_json_is_slurmrestds() -> None:
    from spur.rest import slurmdb

    ref = json.loads((FIXTURES / "slurmdb_associations.json").read_text())["associations"]
    records = [
        slurmdb.AssociationRecord(account="root", cluster="anchor"),
        slurmdb.AssociationRecord(account="research", cluster="anchor", parent_account="root"),
        slurmdb.AssociationRecord(account="research", cluster="anchor", user="root"),
        slurmdb.AssociationRecord(account="root", cluster="anchor", user="root", is_default=True),
    ]
    assert [slurmdb.association_to_json(r) for r in records] == ref


def test_entity_routes_are_operations_of_the_reference_document() -> None:
    from spur.rest import slurmdb
    from spur.rest.openapi import reference_document

    paths = reference_document()["paths"]
    for route in slurmdb.ENTITY_ROUTES:
        assert route.method in paths[route.path], (route.path, route.method)
    served = {(r.path, r.method) for r in slurmdb.ENTITY_ROUTES}
    for path, item in paths.items():
        if path.startswith("/slurmdb/") and not path.endswith(("/jobs", "/job/{job_id}", "/diag")):
            for method in ("get", "post", "delete"):
                if path.endswith("/config") and method == "get":
                    continue  # served from the standard TRES plus the backend's lists
                if method in item:
                    assert (path, method) in served, (path, method)


def test_entity_bodies_are_validated() -> None:
    from spur.rest import slurmdb

    accounts = slurmdb.accounts_from_body({"accounts": [{"name": "physics", "description": "d"}]}, "s")
    assert accounts == [slurmdb.AccountRecord(name="physics", description="d")]
    for bad in ({}, {"accounts": {}}, {"accounts": [{"description": "no name"}]}, {"accounts": [{"name": 5}]}):
        with pytest.raises(RestError) as info:
            slurmdb.accounts_from_body(bad, "s")
        assert info.value.status == 400
    with pytest.raises(RestError):
        slurmdb.users_from_body({"users": [{"name": "u", "administrator_level": "God"}]}, "s")
    assert slurmdb.association_filter({"account": "a", "user": ""}) == slurmdb.AssociationFilter(account="a")


def test_config_load_body() -> None:
    from spur.rest import slurmdb

    load = slurmdb.config_from_body(
        {
            "accounts": [{"accounts": [{"name": "physics"}]}],
            "users": [{"name": "alice", "default": {"account": "physics"}}],
            "associations": [{"account": "physics", "cluster": "c", "user": "alice"}],
            "TRES": [{"type": "gres", "name": "gpu"}],
        },
        "s",
    )
    assert [a.name for a in load.accounts] == ["physics"] and load.users[0].default_account == "physics"
    assert load.associations[0].user == "alice" and load.tres[0].name == "gpu" and load.qos == ()
    with pytest.raises(RestError):
        slurmdb.config_from_body({"users": "alice"}, "s")
