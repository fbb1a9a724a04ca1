"""The PMI-1/PMI-2 codec and one rank's session (spur.core.pmi), without sockets."""

from __future__ import annotations

import pytest

from spur.core.pmi import (
    Abort,
    Fence,
    PmiError,
    RankInfo,
    RankSession,
    Reply,
    decode_pmi2,
    encode_pmi2,
    parse_pmi1,
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
