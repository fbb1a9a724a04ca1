"""The log's JSON writer (``spur.state.commands.dumps``): orjson's speed, json's meaning.

Every Raft entry is a command written by ``dumps`` and read by ``decode`` (orjson, with json for
what orjson refuses). Whatever orjson does differently from ``json.dumps`` (NaN and infinities,
integers beyond 64 bits, non-string keys, lone surrogates) must read back as json's text does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spur.core.job import JobSpec, NodeAllocation
from spur.core.serde import to_plain
from spur.state import commands as c
from spur.state.commands import dumps

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: past 64 bits orjson refuses them
    | st.floats()  # NaN and the infinities included
    | st.text()  # lone surrogates included
)
_plain = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equality with NaN equal to NaN (json reads both texts' NaN as a fresh float)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(_plain)
def test_dumps_reads_back_as_json_dumps_does(value: Any) -> None:
    ours = dumps(value)
    theirs = json.dumps(value, separators=(",", ":")).encode()
    assert _same(json.loads(ours), json.loads(theirs))


def test_what_orjson_writes_differently_is_written_by_json() -> None:
    # orjson would write null for these, or refuse them; json's text comes out.
    assert dumps([float("nan"), float("inf"), -float("inf")]) == b"[NaN,Infinity,-Infinity]"
    assert dumps({"big": 2**70}) == b'{"big":1180591620717411303424}'
    assert dumps({1: "a"}) == b'{"1":"a"}'
    assert dumps("\ud800") == b'"\\ud800"'
    # And what both refuse still fails, as json always made it fail.
    for bad in (b"bytes", {"when": object()}):
        try:
            dumps(bad)
        except TypeError:
            continue
        raise AssertionError(f"{bad!r} was written")


def test_a_usual_command_is_orjsons_text_and_decodes_to_itself() -> None:
    spec = JobSpec(name="j", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1, begin_time=0.0)
    cmd = c.SubmitJob(spec, "alice", 1000, 1000, "alice", 12.5, [NodeAllocation("n1", 1, 100, [], 1)])
    data = c.encode(cmd)
    assert data == orjson.dumps(orjson.loads(data))  # the fast path wrote it
    assert c.decode(data) == cmd


def test_a_command_holding_a_nan_keeps_it_through_the_log() -> None:
    spec = JobSpec(name="j", script="true", work_dir="/tmp", begin_time=float("nan"))
    back = c.decode(c.encode(c.SubmitJob(spec, "alice", 1000, 1000, "alice", 1.0, [])))
    assert math.isnan(back.spec.begin_time)


def _written_plainly(cmd: Any) -> bytes:
    """The log's text by definition: the command's ``to_plain`` form, written by ``dumps``."""
    if type(cmd) is c.Batch:
        inner = [{"type": type(i).__name__, "body": to_plain(i)} for i in cmd.commands]
        return dumps({"type": "Batch", "body": {"commands": inner}})
    return dumps({"type": type(cmd).__name__, "body": to_plain(cmd)})


@pytest.mark.parametrize(
    "cls", sorted(c.registry().values(), key=lambda t: t.__name__), ids=lambda t: t.__name__
)
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_command_is_written_as_its_plain_form(cls: type, data: st.DataObject) -> None:
    # encode lets orjson write the dataclasses itself; the bytes must be the plain form's, whatever
    # the values (None, NaN, huge integers and lone surrogates included: those go the plain way).
    cmd = data.draw(st.from_type(cls))
    assert c.encode(cmd) == _written_plainly(cmd)
    assert c.encode(c.Batch([cmd, cmd])) == _written_plainly(c.Batch([cmd, cmd]))


@dataclasses.dataclass
class _Inner:
    _hidden: int = 0


@dataclasses.dataclass
class _Outer:
    items: list[_Inner]


def test_a_command_with_a_private_field_is_refused() -> None:
    # orjson would leave _hidden out of the log, and a follower would apply the default instead
    with pytest.raises(TypeError, match=r"_Inner\._hidden"):
        c._refuse_private_fields(_Outer)
