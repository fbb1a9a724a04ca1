"""Pure logic of the WireGuard mesh: allocation, validation, peer diff, AllowedIPs, UAPI codec, the
``mesh`` state domain and the reconcile decision (no sockets, no interfaces)."""

from __future__ import annotations

import base64
import json

import pytest

from spur.net.endpoint import parse_endpoint_option
from spur.net.model import (
    Member,
    MeshFull,
    PeerState,
    allocate_address,
    allowed_ips,
    check_endpoint,
    check_public_key,
    desired_peers,
    diff_peers,
    pod_routes,
)
from spur.net.reconcile import build_member_delta, build_member_set, merge_member_delta, plan_reconcile
from spur.net.uapi import UapiError, check_set_response, decode_get, encode_get, encode_set
from spur.state import commands as c
from spur.state.machine import Rejected
from spur.state.mesh import JoinMesh, LeaveMesh, MeshDomain, SetMeshPodCidr
from tests.state_helpers import Log, register


def key(n: int) -> str:
    return base64.b64encode(bytes([n]) * 32).decode()


# ---------------------------------------------------------------------------- allocation


def test_allocation_takes_the_lowest_free_host_address() -> None:
    assert allocate_address("10.44.0.0/24", "a", []) == "10.44.0.1"
    assert allocate_address("10.44.0.0/24", "b", ["10.44.0.1", "10.44.0.3"]) == "10.44.0.2"


def test_a_full_range_names_the_node_and_what_to_do() -> None:
    with pytest.raises(MeshFull) as err:
        allocate_address("10.44.0.0/30", "node3", ["10.44.0.1", "10.44.0.2"])
    msg = str(err.value)
    assert "node3" in msg and "10.44.0.0/30" in msg and "2 usable" in msg and "widen wg_cidr" in msg


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", ["", "abc", base64.b64encode(b"x" * 31).decode(), key(1) + "A", "!" * 44])
def test_malformed_public_keys_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="44 characters of base64"):
        check_public_key(bad)


def test_endpoints_are_literal_addresses_with_a_port() -> None:
    assert check_endpoint("192.0.2.1:51820") == "192.0.2.1:51820"
    assert check_endpoint("[2001:db8::1]:51820") == "[2001:db8::1]:51820"
    for bad in (
        "host.example:51820",
        "192.0.2.1",
        "192.0.2.1:0",
        "192.0.2.1:70000",
        "2001:db8::1:5",
        "0.0.0.0:1",
    ):
        with pytest.raises(ValueError):
            check_endpoint(bad)


def test_the_endpoint_option_defaults_the_port() -> None:
    assert parse_endpoint_option("192.0.2.7", 51820) == "192.0.2.7:51820"
    assert parse_endpoint_option("192.0.2.7:4000", 51820) == "192.0.2.7:4000"
    assert parse_endpoint_option("2001:db8::7", 51820) == "[2001:db8::7]:51820"
    with pytest.raises(ValueError, match="host names are not accepted"):
        parse_endpoint_option("node1.example", 51820)


# ---------------------------------------------------------------------------- peers


def members(n: int, pods: bool = False) -> list[Member]:
    return [
        Member(f"n{i}", key(i), f"192.0.2.{i}:51820", f"10.44.0.{i}", f"10.42.{i}.0/24" if pods else "")
        for i in range(1, n + 1)
    ]


def test_allowed_ips_are_the_mesh_host_route_then_the_pod_cidr() -> None:
    assert allowed_ips(Member("a", key(1), "192.0.2.1:1", "10.44.0.1")) == ("10.44.0.1/32",)
    assert allowed_ips(Member("a", key(1), "192.0.2.1:1", "10.44.0.1", "10.42.1.0/24")) == (
        "10.44.0.1/32",
        "10.42.1.0/24",
    )


def test_a_node_never_peers_with_itself() -> None:
    wanted = desired_peers(members(3, pods=True), "n2")
    assert sorted(wanted) == sorted([key(1), key(3)])
    assert wanted[key(3)].allowed_ips == ("10.44.0.3/32", "10.42.3.0/24")
    assert pod_routes(members(3, pods=True), "n2", "10.44.0.0/16") == ["10.42.1.0/24", "10.42.3.0/24"]


def test_diff_adds_updates_and_prunes_only_what_differs() -> None:
    wanted = desired_peers(members(4), "n1")
    actual = {
        key(2): PeerState(key(2), "192.0.2.2:51820", ("10.44.0.2/32",), 25, last_handshake=5.0, rx_bytes=9),
        key(3): PeerState(key(3), "192.0.2.99:51820", ("10.44.0.3/32",), 25),  # moved
        key(9): PeerState(key(9), "192.0.2.9:51820", ("10.44.0.9/32",), 25),  # departed
    }
    diff = diff_peers(actual, wanted)
    assert [p.public_key for p in diff.upsert] == [key(3), key(4)]
    assert diff.remove == [key(9)]
    assert not diff_peers({k: v for k, v in wanted.items()}, wanted)


def test_allowed_ips_order_does_not_count_as_a_change() -> None:
    wanted = {key(2): PeerState(key(2), "192.0.2.2:1", ("10.44.0.2/32", "10.42.2.0/24"), 25)}
    actual = {key(2): PeerState(key(2), "192.0.2.2:1", ("10.42.2.0/24", "10.44.0.2/32"), 25)}
    assert not diff_peers(actual, wanted)


# ---------------------------------------------------------------------------- UAPI codec


def test_set_request_encodes_keys_in_hex_and_replaces_allowed_ips() -> None:
    diff = diff_peers({key(9): PeerState(key(9))}, desired_peers(members(2, pods=True), "n1"))
    text = encode_set(
        private_key_b64=key(7), listen_port=51820, upsert=diff.upsert, remove=diff.remove
    ).decode()
    assert text.endswith("\n\n") and text.startswith("set=1\n")
    lines = text.strip().split("\n")
    assert f"private_key={'07' * 32}" in lines and "listen_port=51820" in lines
    assert lines[3:5] == [f"public_key={'09' * 32}", "remove=true"]
    assert lines[5:] == [
        f"public_key={'02' * 32}",
        "endpoint=192.0.2.2:51820",
        "persistent_keepalive_interval=25",
        "replace_allowed_ips=true",
        "allowed_ip=10.44.0.2/32",
        "allowed_ip=10.42.2.0/24",
    ]
    assert encode_get() == b"get=1\n\n"


def test_get_response_decodes_peers_handshakes_and_counters() -> None:
    answer = (
        f"private_key={'07' * 32}\nlisten_port=51820\n"
        f"public_key={'02' * 32}\nendpoint=192.0.2.2:51820\nlast_handshake_time_sec=1700000000\n"
        "last_handshake_time_nsec=500000000\ntx_bytes=100\nrx_bytes=200\npersistent_keepalive_interval=25\n"
        "allowed_ip=10.44.0.2/32\nallowed_ip=10.42.2.0/24\nprotocol_version=1\n"
        f"public_key={'03' * 32}\nlast_handshake_time_sec=0\nlast_handshake_time_nsec=0\n"
        "errno=0\n\n"
    ).encode()
    dev = decode_get(answer)
    assert dev.listen_port == 51820 and dev.has_private_key
    p2 = dev.peers[key(2)]
    assert p2.endpoint == "192.0.2.2:51820" and p2.allowed_ips == ("10.44.0.2/32", "10.42.2.0/24")
    assert (p2.last_handshake, p2.tx_bytes, p2.rx_bytes, p2.keepalive) == (1700000000.5, 100, 200, 25)
    assert dev.peers[key(3)].last_handshake == 0 and dev.peers[key(3)].allowed_ips == ()


def test_uapi_errors_are_raised() -> None:
    with pytest.raises(UapiError, match="errno 22"):
        check_set_response(b"errno=22\n\n")
    with pytest.raises(UapiError, match="no errno"):
        decode_get(b"listen_port=1\n\n")
    with pytest.raises(UapiError, match="malformed"):
        decode_get(b"garbage\nerrno=0\n\n")
    check_set_response(b"errno=0\n\n")


# ---------------------------------------------------------------------------- the mesh state domain


def mesh_log(*nodes: str) -> Log:
    log = Log()
    for n in nodes:
        register(log, n)
    return log


def domain(log: Log) -> MeshDomain:
    d = log.state.domains["mesh"]
    assert isinstance(d, MeshDomain)
    return d


def test_join_allocates_keeps_and_never_reuses_a_held_address() -> None:
    log = mesh_log("a", "b", "c")
    e = log(JoinMesh("a", "10.44.0.0/24", key(1), "192.0.2.1:51820", 1.0))
    assert e.address == "10.44.0.1"
    assert log(JoinMesh("b", "10.44.0.0/24", key(2), "192.0.2.2:51820", 1.0)).address == "10.44.0.2"
    # A re-join (new key) keeps the address.
    assert log(JoinMesh("a", "10.44.0.0/24", key(5), "192.0.2.1:51820", 2.0)).address == "10.44.0.1"
    assert log(LeaveMesh("a", 3.0)) is True
    assert domain(log).address_of("a") is None
    assert log(JoinMesh("c", "10.44.0.0/24", key(3), "192.0.2.3:51820", 4.0)).address == "10.44.0.1"
    assert domain(log).address_of("b") == "10.44.0.2"
    replayed = log.replay().domains["mesh"]
    assert replayed.snapshot() == domain(log).snapshot()  # type: ignore[union-attr]


def test_too_small_a_range_fails_at_the_allocation_that_does_not_fit() -> None:
    log = mesh_log("a", "b", "c")
    assert log(JoinMesh("a", "10.44.0.0/30", key(1), "192.0.2.1:1", 1.0)).address == "10.44.0.1"
    assert log(JoinMesh("b", "10.44.0.0/30", key(2), "192.0.2.2:1", 1.0)).address == "10.44.0.2"
    before = json.dumps(domain(log).snapshot())
    third = log(JoinMesh("c", "10.44.0.0/30", key(3), "192.0.2.3:1", 1.0))
    assert isinstance(third, Rejected) and third.code == "RESOURCE_EXHAUSTED" and "node c" in third.message
    assert json.dumps(domain(log).snapshot()) == before


@pytest.mark.parametrize(
    ("pub", "endpoint", "what"),
    [("not-a-key", "192.0.2.1:1", "public key"), (key(1), "example.org:1", "endpoint")],
)
def test_malformed_key_or_endpoint_changes_nothing(pub: str, endpoint: str, what: str) -> None:
    log = mesh_log("a", "b")
    log(JoinMesh("b", "10.44.0.0/24", key(2), "192.0.2.2:1", 1.0))
    before = json.dumps(domain(log).snapshot())
    result = log(JoinMesh("a", "10.44.0.0/24", pub, endpoint, 1.0))
    assert isinstance(result, Rejected) and result.code == "INVALID_ARGUMENT" and what in result.message
    assert json.dumps(domain(log).snapshot()) == before
    assert [m.node for m in domain(log).members()] == ["b"]


def test_unregistered_nodes_cannot_join() -> None:
    result = mesh_log()(JoinMesh("ghost", "10.44.0.0/24", key(1), "192.0.2.1:1", 1.0))
    assert isinstance(result, Rejected) and result.code == "NOT_FOUND"


def test_pod_cidr_joins_the_member_set_and_removed_nodes_leave_it() -> None:
    log = mesh_log("a", "b")
    log(JoinMesh("a", "10.44.0.0/24", key(1), "192.0.2.1:1", 1.0))
    log(JoinMesh("b", "10.44.0.0/24", key(2), "192.0.2.2:1", 1.0))
    assert log(SetMeshPodCidr("b", "10.42.1.0/24")).pod_cidr == "10.42.1.0/24"
    assert isinstance(log(SetMeshPodCidr("b", "10.42.1.1/24")), Rejected)  # host bits set
    assert isinstance(log(SetMeshPodCidr("zz", "10.42.1.0/24")), Rejected)
    assert domain(log).members()[1].pod_cidr == "10.42.1.0/24"
    assert log(c.RemoveNode(["b"], 2.0)) == ["b"]
    assert [m.node for m in domain(log).members()] == ["a"]
    assert domain(log).departed() == ["b"]


def test_remove_node_refuses_unknown_nodes() -> None:
    result = mesh_log("a")(c.RemoveNode(["a", "nope"], 1.0))
    assert isinstance(result, Rejected) and "nope" in result.message


# ---------------------------------------------------------------------------- reconcile decision


def test_reconcile_pushes_to_every_member_and_reports_changes() -> None:
    first = plan_reconcile(members(3), {}, ["gone"])
    assert (
        first.push_to == ["n1", "n2", "n3"]
        and first.added == ["n1", "n2", "n3"]
        and first.release == ["gone"]
    )
    moved = [*members(2), Member("n3", key(33), "192.0.2.3:51820", "10.44.0.3")]
    second = plan_reconcile(moved[1:], first.members, [])
    assert second.removed == ["n1"] and second.changed == ["n3"] and second.added == []
    message = build_member_set(moved, cidr="10.44.0.0/24", listen_port=51820, version=7)
    assert [m.node for m in message.members] == ["n1", "n2", "n3"] and message.version == 7


def test_a_delta_names_what_changed_and_merges_only_onto_its_base() -> None:
    first = plan_reconcile(members(3), {}, [])
    held = build_member_set(members(3), cidr="10.44.0.0/24", listen_port=51820, version=4)
    moved = [members(2)[1], Member("n3", key(33), "192.0.2.3:51820", "10.44.0.3"), members(4)[3]]
    second = plan_reconcile(moved, first.members, [])
    delta = build_member_delta(second, base_version=4, version=7, cidr="10.44.0.0/24", listen_port=51820)
    assert [m.node for m in delta.upsert] == ["n3", "n4"] and list(delta.removed) == ["n1"]

    merged = merge_member_delta(held, delta)
    assert merged is not None and merged.version == 7
    assert merged == build_member_set(moved, cidr="10.44.0.0/24", listen_port=51820, version=7)
    # not its base: no set held, another version, another range or port
    assert merge_member_delta(None, delta) is None
    assert merge_member_delta(merged, delta) is None
    for other in ({"cidr": "10.45.0.0/24"}, {"listen_port": 51821}):
        base = build_member_set(members(3), **{"cidr": "10.44.0.0/24", "listen_port": 51820, **other}, version=4)
        assert merge_member_delta(base, delta) is None
