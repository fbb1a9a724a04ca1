"""spur.rpc.lite: the pure-Python codec agrees with protobuf (upb) on every message it covers."""

from __future__ import annotations

import pytest

from spur.core.job import JobSpec
from spur.rpc import lite, litegen
from spur.rpc.convert import spec_to_proto
from spur.rpc.proto import spur_pb2 as pb


def full_job_info(job_id: int = 5) -> pb.JobInfo:
    """A JobInfo with every kind of field set: strings, negative ints, big uint64s, doubles, an
    optional set to 0, repeated messages, a map, packed numbers, nested steps."""
    spec = pb.JobSpec(
        name="tr\u00e4in",
        argv=["a", "", "c"],
        environment={"A": "1", "EMPTY": ""},
        num_nodes=2,
        cpus_per_task=3,
        time_limit_secs=-1,
        nice=-7,
        gres=["gpu:2"],
        exclusive=True,
        begin_time=1.25e9,
        work_dir="/w",
    )
    step = pb.StepInfo(
        step_id=0, spec=pb.StepSpec(argv=["hostname"], environment={"K": "V"}), state="RUNNING"
    )
    return pb.JobInfo(
        job_id=job_id,
        spec=spec,
        user="alice",
        uid=1000,
        state="RUNNING",
        submit_time=1.5,
        exit_code=-2,
        signal=9,
        time_limit_secs=-1,
        priority=2**40 + 3,
        array_task_id=0,
        allocation=[pb.NodeAllocation(node="n1", cpus=2, gpus=[0, 1, 300]), pb.NodeAllocation(node="n2")],
        steps=[step],
        nodelist="n[1-2]",
    )


def lite_matches(msg, lmsg) -> None:
    """Every field of the protobuf message reads the same on the lite one (recursively)."""
    assert lmsg.DESCRIPTOR.full_name == msg.DESCRIPTOR.full_name
    for f in msg.DESCRIPTOR.fields:
        value, lvalue = getattr(msg, f.name), getattr(lmsg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            assert dict(value) == dict(lvalue), f.name
        elif f.message_type is not None and f.is_repeated:
            assert len(value) == len(lvalue), f.name
            for a, b in zip(value, lvalue, strict=True):
                lite_matches(a, b)
        elif f.message_type is not None:
            lite_matches(value, lvalue)
        elif f.is_repeated:
            assert list(value) == list(lvalue), f.name
        else:
            assert value == lvalue and type(value) is type(lvalue), f.name
        if f.has_presence and not f.is_repeated:
            assert msg.HasField(f.name) == lmsg.HasField(f.name), f.name


def test_schema_tables_are_generated_from_the_current_descriptors() -> None:
    """Run ``python -m spur.rpc.litegen`` when this fails."""
    assert litegen.OUT.read_text() == litegen.render()


@pytest.mark.parametrize(
    "msg",
    [
        pb.GetJobsResponse(jobs=[full_job_info(1), pb.JobInfo(job_id=2), full_job_info(3)]),
        pb.GetJobsResponse(),
        pb.GetJobsRequest(job_ids=[1, 2**33, 7], users=["u"], states=["PD", "R"], include_finished=True),
        pb.SubmitJobRequest(spec=full_job_info().spec),
        pb.SubmitJobResponse(job_id=2**35),
    ],
)
def test_decoding_and_encoding_agree_with_protobuf(msg) -> None:
    data = msg.SerializeToString()
    cls = lite.message_class(msg.DESCRIPTOR.full_name)
    decoded = cls.FromString(data)
    lite_matches(msg, decoded)
    assert type(msg).FromString(decoded.SerializeToString()) == msg


def test_unset_fields_read_as_protobuf_defaults() -> None:
    job = lite.JobInfo.FromString(pb.JobInfo(job_id=1).SerializeToString())
    lite_matches(pb.JobInfo(job_id=1), job)
    assert (job.user, job.submit_time, job.allocation, job.spec.name, job.spec.environment) == (
        "",
        0.0,
        (),
        "",
        {},
    )
    assert job.HasField("array_task_id") is False and job.HasField("spec") is False
    with pytest.raises(ValueError):
        job.HasField("user")  # no presence in proto3, as protobuf says
    with pytest.raises(ValueError):
        lite.JobInfo(no_such_field=1)


def test_constructed_messages_encode_as_protobuf_does() -> None:
    kwargs = {"job_id": 9, "array_task_id": 0, "exit_code": -1, "state": "PENDING", "submit_time": 2.5}
    assert lite.JobInfo(**kwargs).SerializeToString() == pb.JobInfo(**kwargs).SerializeToString()
    req = {"job_ids": [3, 2**40], "users": ["a", "b"], "include_finished": True}
    assert lite.GetJobsRequest(**req).SerializeToString() == pb.GetJobsRequest(**req).SerializeToString()


def test_spec_request_is_what_convert_builds() -> None:
    spec = JobSpec(
        name="j", script="#!/bin/sh\ntrue\n", argv=["x"], environment={"SLURM_SUBMIT_HOST": "h", "B": "2"},
        num_tasks=4, nice=-3, begin_time=12.5, constraint=["a", "b"], hold=True,
    )  # fmt: skip
    expected = pb.SubmitJobRequest(spec=spec_to_proto(spec))
    assert pb.SubmitJobRequest.FromString(lite.spec_request(spec).SerializeToString()) == expected


def test_unknown_fields_and_unpacked_numbers_are_read_as_protobuf_reads_them() -> None:
    base = pb.GetJobsRequest(job_ids=[4]).SerializeToString()
    unknown = (
        bytes([0xB8, 0x3E, 0x96, 0x01])  # field 999, varint 150
        + bytes([0xB9, 0x3E]) + bytes(8)  # field 999, fixed64
        + bytes([0xBA, 0x3E, 0x02]) + b"hi"  # field 999, length-delimited
        + bytes([0xBD, 0x3E]) + bytes(4)  # field 999, fixed32
        + bytes([0x08, 0x05])  # field 1 (job_ids) unpacked: 5
    )  # fmt: skip
    decoded = lite.GetJobsRequest.FromString(base + unknown)
    assert decoded.job_ids == list(pb.GetJobsRequest.FromString(base + unknown).job_ids) == [4, 5]


@pytest.mark.parametrize(
    "name, data",
    [
        ("GetJobsResponse", b"\x0a\x05abc"),
        ("GetJobsResponse", b"\x08"),
        ("GetJobsResponse", b"\x08\x80"),
        ("GetJobsResponse", b"\x0b"),
        ("GetJobsResponse", b"\x41\x00"),
        ("JobInfo", b"\x41\x00\x00"),
        ("JobInfo", b"\x1a\x02\xff\xfe"),
    ],
    ids=[
        "short-length",
        "no-varint",
        "unterminated-varint",
        "group",
        "short-unknown-fixed64",
        "short-double",
        "bad-utf8",
    ],
)
def test_malformed_input_raises_decode_error(name: str, data: bytes) -> None:
    with pytest.raises(lite.DecodeError):
        getattr(lite, name).FromString(data)


def test_adaptive_decoding_hands_large_responses_to_protobuf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to PROTOBUF_ABOVE bytes the lite codec decodes; beyond, protobuf (faster once loaded)."""
    msg = pb.GetJobsResponse(jobs=[full_job_info(i) for i in range(1, 4)])
    data = msg.SerializeToString()
    adaptive = lite.Adaptive("spur.v1.GetJobsResponse")
    small = adaptive.FromString(data)
    assert isinstance(small, lite.Message)
    monkeypatch.setattr(lite, "PROTOBUF_ABOVE", len(data) - 1)
    large = adaptive.FromString(data)
    assert isinstance(large, pb.GetJobsResponse) and large == msg
    lite_matches(msg, small)
    with pytest.raises(lite.DecodeError):
        adaptive.FromString(data[:-1] + b"\xff" * 2)
