"""The PMI-1/PMI-2 codec and one rank's session (spur.core.pmi), without sockets."""

from __future__ import annotations

import pytest

from spur.core.pmi import (
    Abort,
    Fence,
    FenceCoordinator,
    PmiError,
    RankInfo,
    RankSession,
    Reply,
    decode_node_message,
    decode_pmi2,
    encode_node_message,
    encode_pmi2,
    parse_pmi1,
    process_mapping,
)

INFO = RankInfo(rank=1, size=4, jobid="12.0")


def test_pmi2_frames_round_trip_with_escaped_semicolons_and_partial_input():
    frame = encode_pmi2([("cmd", "kvs-put"), ("key", "k"), ("value", "a;b")])
    assert frame == b"000029cmd=kvs-put;key=k;value=a;;b;"
    frames, rest = decode_pmi2(frame + frame[:10])
    assert frames == [[("cmd", "kvs-put"), ("key", "k"), ("value", "a;b")]] and rest == frame[:10]


def test_malformed_input_is_a_protocol_error():
    with pytest.raises(PmiError):
        decode_pmi2(b"00abcdcmd=x;")
    with pytest.raises(PmiError):
        parse_pmi1("cmd=put garbage")


def test_pmi2_session_init_put_fence_get():
    s = RankSession(INFO)
    [init] = s.receive(b"cmd=init pmi_version=2 pmi_subversion=0\n")
    assert init == Reply(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")
    [full] = s.receive(encode_pmi2([("cmd", "fullinit"), ("pmirank", "1"), ("threaded", "FALSE")]))
    pairs = dict(decode_pmi2(full.data)[0][0])
    assert (pairs["rank"], pairs["size"], pairs["spawner-jobid"]) == ("1", "4", "12.0")
    s.receive(encode_pmi2([("cmd", "kvs-put"), ("key", "bc-1"), ("value", "addr1")]))
    assert s.receive(encode_pmi2([("cmd", "kvs-fence")])) == [Fence({"bc-1": "addr1"})]
    done = s.fence_done({"bc-1": "addr1", "bc-0": "addr0"})
    assert dict(decode_pmi2(done.data)[0][0]) == {"cmd": "kvs-fence-response", "rc": "0"}
    [got] = s.receive(encode_pmi2([("cmd", "kvs-get"), ("key", "bc-0")]))
    assert dict(decode_pmi2(got.data)[0][0])["value"] == "addr0"
    assert s.receive(encode_pmi2([("cmd", "abort"), ("message", "bad")])) == [Abort(1, "bad")]


def test_pmi1_session_as_mpich_simple_pmi_speaks_it():
    s = RankSession(INFO)
    s.receive(b"cmd=init pmi_version=1 pmi_subversion=1\n")
    [kvs] = s.receive(b"cmd=get_my_kvsname\n")
    assert kvs.data == b"cmd=my_kvsname rc=0 kvsname=12.0\n"
    actions = s.receive(b"cmd=put kvsname=12.0 key=k1 value=v1\ncmd=barrier_in\n")
    assert actions[-1] == Fence({"k1": "v1"})
    assert s.fence_done({"k1": "v1"}).data == b"cmd=barrier_out rc=0\n"
    assert s.receive(b"cmd=get kvsname=12.0 key=k1\n")[0].data == b"cmd=get_result rc=0 value=v1\n"
    assert s.receive(b"cmd=abort exitcode=7\n") == [Abort(7, "")]


def test_process_mapping_groups_equal_blocks():
    assert process_mapping([2, 2]) == "(vector,(0,2,2))"
    assert process_mapping([3, 3, 1]) == "(vector,(0,2,3),(2,1,1))"


def test_job_attributes_answer_pmi2_getjobattr_and_pmi1_get():
    info = RankInfo(0, 4, "12.0", attrs=(("PMI_process_mapping", "(vector,(0,2,2))"),))
    s2 = RankSession(info, version=2)
    [got] = s2.receive(encode_pmi2([("cmd", "info-getjobattr"), ("key", "PMI_process_mapping")]))
    assert dict(decode_pmi2(got.data)[0][0])["value"] == "(vector,(0,2,2))"
    [missing] = s2.receive(encode_pmi2([("cmd", "info-getjobattr"), ("key", "nope")]))
    assert dict(decode_pmi2(missing.data)[0][0])["found"] == "FALSE"
    s1 = RankSession(info)
    s1.receive(b"cmd=init pmi_version=1 pmi_subversion=1\n")
    [got1] = s1.receive(b"cmd=get kvsname=12.0 key=PMI_process_mapping\n")
    assert got1.data == b"cmd=get_result rc=0 value=(vector,(0,2,2))\n"


def test_fence_coordinator_answers_once_every_rank_of_the_fence_arrived():
    c = FenceCoordinator(size=4)
    assert c.arrive(0, 2, {"a": "1"}) is None
    assert c.arrive(0, 2, {"b": "2"}) == {"a": "1", "b": "2"}
    assert c.arrive(1, 3, {}) is None  # the next fence starts empty
    with pytest.raises(PmiError):
        c.arrive(1, 2, {})  # 5 ranks of a 4-rank step
    with pytest.raises(PmiError):
        c.arrive(2, 0, {})


def test_node_messages_are_json_lines():
    line = encode_node_message({"fence": 0, "puts": {"k": "a b;c"}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_node_message(line.rstrip()) == {"fence": 0, "puts": {"k": "a b;c"}}
    with pytest.raises(PmiError):
        decode_node_message(b"[1]")
    with pytest.raises(PmiError):
        decode_node_message(b"{")
