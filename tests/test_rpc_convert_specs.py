"""Job and step specs read from the wire (spur.rpc.convert): reading only the fields set on the wire
gives exactly what reading every field gives, for any mix of set and unset fields."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import given, settings
from hypothesis import strategies as st

from spur.core.job import JobSpec, StepSpec
from spur.rpc import convert
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.protowire import varint


def _every_field(cls: type, msg) -> dict[str, object]:
    """The reference: every dataclass field read from the message, set or not."""
    out: dict[str, object] = {}
    for f in fields(cls):
        fd = msg.DESCRIPTOR.fields_by_name[f.name]
        value = getattr(msg, f.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value = dict(value)
        elif fd.is_repeated:
            value = list(value)
        out[f.name] = value
    return out


def _random_message(message_type, draw) -> object:
    msg = message_type()
    for fd in message_type.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue  # left unset
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            getattr(msg, fd.name).update(
                draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3))
            )
            continue
        if fd.type == fd.TYPE_STRING:
            values = st.text(max_size=6)
        elif fd.type == fd.TYPE_BOOL:
            values = st.booleans()
        elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            values = st.floats(0, 1e6, allow_nan=False).map(float)
        elif fd.type in (fd.TYPE_UINT32, fd.TYPE_UINT64):
            values = st.integers(0, 1000)
        elif fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_SINT32, fd.TYPE_SINT64):
            values = st.integers(-1000, 1000)
        else:
            continue  # nested messages: not part of the specs' flat fields
        if fd.is_repeated:
            getattr(msg, fd.name).extend(draw(st.lists(values, max_size=3)))
        else:
            setattr(msg, fd.name, draw(values))
    return msg


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_job_spec_read_from_its_set_fields_equals_one_read_from_every_field(data) -> None:
    msg = _random_message(pb.JobSpec, data.draw)
    values = _every_field(JobSpec, msg)
    values["num_nodes"] = values["num_nodes"] or 1
    values["cpus_per_task"] = values["cpus_per_task"] or 1
    assert convert.spec_from_proto(msg) == JobSpec(**values)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_step_spec_read_from_its_set_fields_equals_one_read_from_every_field(data) -> None:
    msg = _random_message(pb.StepSpec, data.draw)
    assert convert.step_spec_from_proto(msg) == StepSpec(**_every_field(StepSpec, msg))


def test_an_empty_job_spec_keeps_the_wire_defaults() -> None:
    spec = convert.spec_from_proto(pb.JobSpec())
    assert spec.num_nodes == 1 and spec.cpus_per_task == 1
    assert spec == JobSpec(**{**_every_field(JobSpec, pb.JobSpec()), "num_nodes": 1, "cpus_per_task": 1})


@settings(max_examples=200, deadline=None)
@given(
    st.data(),
    st.text(max_size=8),
    st.integers(0, 2**32 - 1),
    st.booleans(),
    st.integers(0, 2**64 - 1),
    st.text(max_size=40),
    st.integers(0, 300),
)
def test_launch_request_bytes_decode_to_the_launch_request_built_as_a_message(
    data, node: str, first_task: int, batch: bool, fence_term: int, cluster_id: str, script_len: int
) -> None:
    spec = _random_message(pb.JobSpec, data.draw)
    spec.script = "x" * script_len  # lengths on both sides of one-byte varints
    info = pb.JobInfo(job_id=data.draw(st.integers(0, 2**31)), user="u", spec=spec)
    fields = dict(node=node, first_task=first_task, batch=batch, fence_term=fence_term, cluster_id=cluster_id)
    encoded = convert.launch_request_bytes(info, **fields)
    assert pb.LaunchJobRequest.FromString(encoded) == pb.LaunchJobRequest(job=info, **fields)
    if not spec.environment:  # with no map field, the bytes are protobuf's own, byte for byte
        assert encoded == pb.LaunchJobRequest(job=info, **fields).SerializeToString()


def test_varint_and_embedded_field_match_protobuf() -> None:
    assert varint(0) == b"\x00"
    for n in (1, 127, 128, 300, 16_383, 16_384, 2**32, 2**64 - 1):  # fence_term is field 5, a one-byte tag
        assert varint(n) == pb.LaunchJobRequest(fence_term=n).SerializeToString()[1:]
    payload = b"y" * 200
    assert convert.embedded_field(2, payload) == pb.LaunchJobRequest(node="y" * 200).SerializeToString()
