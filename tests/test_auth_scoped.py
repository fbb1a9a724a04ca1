"""Scoped credentials (issue 20 item 4): audiences per method, daemons never admins, the verified gid,
token lifetimes, the replicated deny-list and the Auth service's mint/revoke rules."""

from __future__ import annotations

import subprocess
import uuid

import pytest
import trio

from spur.auth.admin import is_admin
from spur.auth.denylist import LearntDenyList
from spur.auth.groups import SystemGroups
from spur.auth.guard import ServerAuth
from spur.auth.identity import Identity
from spur.auth.keys import AuthSettings
from spur.auth.policy import DAEMON_CALLERS, METHOD_PRIVILEGE, Privilege, Refusal, authorize
from spur.auth.service import AuthService
from spur.auth.tokens import mint, verify
from spur.rpc.proto import auth_pb2
from spur.rpc.status import RpcError, StatusCode
from spur.state.machine import ClusterState, Rejected
from spur.state.revocation import RevocationDomain, RevokeToken
from tests.state_helpers import Log

KEY = b"scoped-test-key-0123456789abcdef0123"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Groups:
    """alice: primary 100, also in 200; nobody else exists."""

    def is_member(self, user: str, gid: int) -> bool:
        return user == "alice" and gid in (100, 200)

    def primary_gid(self, user: str) -> int | None:
        return 100 if user == "alice" else None

    def group_name(self, gid: int) -> str | None:
        return {100: "users", 200: "proj"}.get(gid)


def _auth(mode: str = "required", *, state=None, audience: str = "controller", **settings) -> ServerAuth:
    return ServerAuth(
        AuthSettings(mode=mode, key=KEY, **settings),
        daemon_name="spurctld",
        clock=Clock(),
        daemon_audience=audience,
        groups=Groups(),
        state=state,
    )


def _call(auth: ServerAuth, method: str, token: str, **claimed: str):
    return auth.authenticate(method, {**claimed, "authorization": f"Bearer {token}"}, "peer")


def _daemon(audience: str, uid: int = 0) -> Identity:
    return Identity(uid, 0, "spurctld", "root", verified=True, audience=audience)


def _all_methods() -> list[str]:
    from spur.rpc.proto import (
        accounting_pb2,
        admission_pb2,
        auth_pb2,
        batch_pb2,
        inventory_pb2,
        k0s_pb2,
        k8s_pb2,
        mesh_pb2,
        spur_pb2,
    )

    out = []
    for module in (
        spur_pb2,
        accounting_pb2,
        admission_pb2,
        auth_pb2,
        batch_pb2,
        inventory_pb2,
        k0s_pb2,
        k8s_pb2,
        mesh_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            out += [f"/{service.full_name}/{m.name}" for m in service.methods]
    return out


# ---------------------------------------------------------------- audiences and admin


def test_a_daemon_is_never_an_admin_even_as_uid_0() -> None:
    for audience in ("controller", "agent", "raft"):
        assert not is_admin(_daemon(audience))
    assert is_admin(Identity(0, 0, "root", "root", verified=True))


def test_daemon_audiences_reach_only_their_methods() -> None:
    methods = _all_methods()
    for name in DAEMON_CALLERS:  # the table names real methods
        assert name in methods, name
    acting_for_users = [
        "/spur.v1.Controller/SubmitJob",
        "/spur.v1.Controller/CancelJob",
        "/spur.v1.Controller/UpdateJob",
        "/spur.v1.Controller/CreateStep",
        "/spur.v1.Controller/UpdateNode",
        "/spur.v1.Auth/MintToken",
        "/spur.v1.Auth/RevokeToken",
        "/spur.v1.Accounting/Change",
        "/spur.admission.v1.Admission/CreateToken",
        "/spur.v1.Agent/LaunchStep",
    ]
    for method in methods:
        for audience in ("controller", "agent", "raft"):
            for mode in ("disabled", "permissive", "required"):
                refusal = authorize(method, _daemon(audience), mode=mode)
                allowed = audience in DAEMON_CALLERS.get(method, ())
                assert (refusal is None) == allowed, (method, audience, mode)
                if refusal is not None:
                    assert refusal.code == "PERMISSION_DENIED" and "daemon credential" in refusal.message
    for method in acting_for_users:
        assert not any(a in DAEMON_CALLERS.get(method, ()) for a in ("controller", "agent", "raft"))
    assert not any("raft" in allowed for allowed in DAEMON_CALLERS.values())


@pytest.mark.parametrize(
    ("method", "audience"),
    [
        ("/spur.v1.Controller/Heartbeat", "agent"),
        ("/spur.v1.Controller/RegisterNode", "agent"),
        ("/spur.batch.v1.ControllerBatch/ReportJobStatuses", "agent"),
        ("/spur.v1.Agent/LaunchJob", "controller"),
        ("/spur.batch.v1.AgentBatch/LaunchJobs", "controller"),
        ("/spur.v1.Agent/SignalJob", "controller"),
        ("/spur.k0s.v1.K0sAgent/Apply", "controller"),
        ("/spur.mesh.v1.MeshAgent/Apply", "controller"),
    ],
)
def test_daemon_methods_need_the_right_audience(method: str, audience: str) -> None:
    other = "agent" if audience == "controller" else "controller"
    assert authorize(method, _daemon(audience), mode="required") is None
    refused = authorize(method, _daemon(other), mode="required")
    assert isinstance(refused, Refusal) and f"needs a {audience} credential" in refused.message
    user = Identity(1001, 100, "alice", "users", verified=True)
    assert METHOD_PRIVILEGE[method] is Privilege.DAEMON
    assert isinstance(authorize(method, user, mode="required"), Refusal)
    admin = Identity(1001, 100, "alice", "users", admin=True, verified=True)
    assert authorize(method, admin, mode="required") is None  # an admin user keeps driving them


def test_a_daemon_token_cannot_carry_admin_and_its_identity_has_its_audience() -> None:
    auth = _auth()
    token = mint(KEY, "spurctld", 0, now=NOW, ttl_secs=300, audience="controller")
    ident = _call(auth, "/spur.v1.Controller/GetControllerStatus", token)
    assert isinstance(ident, Identity) and ident.audience == "controller" and ident.daemon
    refused = _call(auth, "/spur.v1.Auth/MintToken", token)
    assert isinstance(refused, Refusal) and refused.code == "PERMISSION_DENIED"
    refused = _call(auth, "/spur.v1.Controller/SubmitJob", token, **{"x-spur-uid": "0"})
    assert isinstance(refused, Refusal) and "cannot act for a user" in refused.message


# ---------------------------------------------------------------- the verified gid


@pytest.mark.parametrize(
    ("claimed_gid", "expected"),
    [
        (None, (100, "users")),  # the primary group
        ("200", (200, "proj")),  # a group she is in
        ("0", (100, "users")),  # root's group: not hers -> her primary group
        ("99999999999999999999", (100, "users")),
    ],
)
def test_a_token_without_gid_records_a_verified_gid(claimed_gid, expected) -> None:
    auth = _auth()
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=60)
    claimed = {"x-spur-gid": claimed_gid, "x-spur-group": "root"} if claimed_gid else {}
    ident = _call(auth, "/spur.v1.Controller/SubmitJob", token, **claimed)
    assert isinstance(ident, Identity), ident
    assert (ident.gid, ident.group) == expected


def test_a_token_without_gid_for_an_unknown_user_is_refused() -> None:
    token = mint(KEY, "mallory", 4242, now=NOW, ttl_secs=60)
    refused = _call(_auth(), "/spur.v1.Controller/SubmitJob", token, **{"x-spur-gid": "0"})
    assert isinstance(refused, Refusal) and refused.code == "PERMISSION_DENIED"
    assert "mallory" in refused.message and "gid" in refused.message


def test_a_token_gid_wins_and_a_disagreeing_header_is_refused() -> None:
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=60, gid=200)
    assert _call(_auth(), "/spur.v1.Controller/SubmitJob", token).gid == 200
    refused = _call(_auth(), "/spur.v1.Controller/SubmitJob", token, **{"x-spur-gid": "0"})
    assert isinstance(refused, Refusal) and "disagrees" in refused.message


@pytest.fixture
def real_user():
    """A real user spscNNNN with a primary group and one supplementary group (needs root)."""
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("needs root for useradd")
    suffix = uuid.uuid4().hex[:6]
    user, extra = f"spscu{suffix}", f"spscg{suffix}"
    subprocess.run(["groupadd", extra], check=True)
    subprocess.run(["useradd", "-M", "-G", extra, user], check=True)
    try:
        yield user, extra
    finally:
        subprocess.run(["userdel", user], check=False)
        subprocess.run(["groupdel", extra], check=False)
        subprocess.run(["groupdel", user], check=False, capture_output=True)


def test_system_groups_reads_real_groups(real_user) -> None:
    import grp
    import pwd

    user, extra = real_user
    entry = pwd.getpwnam(user)
    extra_gid = grp.getgrnam(extra).gr_gid
    groups = SystemGroups()
    assert groups.primary_gid(user) == entry.pw_gid
    assert groups.is_member(user, entry.pw_gid) and groups.is_member(user, extra_gid)
    assert not groups.is_member(user, 0)
    assert groups.group_name(extra_gid) == extra
    assert groups.primary_gid("spsc-no-such-user") is None
    auth = ServerAuth(AuthSettings(mode="required", key=KEY), daemon_name="spurctld", clock=Clock())
    token = mint(KEY, user, entry.pw_uid, now=NOW, ttl_secs=60)
    for claimed, want in (("0", entry.pw_gid), (str(extra_gid), extra_gid), (None, entry.pw_gid)):
        headers = {"x-spur-gid": claimed} if claimed else {}
        ident = _call(auth, "/spur.v1.Controller/SubmitJob", token, **headers)
        assert isinstance(ident, Identity) and ident.gid == want, (claimed, ident)


# ---------------------------------------------------------------- lifetimes and the deny-list


def test_lifetimes_and_future_tokens_are_refused_on_every_verify() -> None:
    auth = _auth(max_token_lifespan=3600)
    long = mint(KEY, "alice", 1001, now=NOW, ttl_secs=10 * 365 * 86400, gid=100)
    refused = _call(auth, "/spur.v1.Controller/GetJobs", long)
    assert isinstance(refused, Refusal) and "auth.max_token_lifespan" in refused.message
    future = mint(KEY, "alice", 1001, now=NOW + 3600, ttl_secs=600, gid=100)
    refused = _call(auth, "/spur.v1.Controller/GetJobs", future)
    assert isinstance(refused, Refusal) and "future" in refused.message
    skewed = mint(KEY, "alice", 1001, now=NOW + 30, ttl_secs=600, gid=100)
    assert isinstance(_call(auth, "/spur.v1.Controller/GetJobs", skewed), Identity)
    daemon = mint(KEY, "spurd", 0, now=NOW, ttl_secs=2 * 3600, audience="agent")
    refused = _call(auth, "/spur.v1.Controller/Heartbeat", daemon)
    assert isinstance(refused, Refusal) and "lifetime" in refused.message


def _state_with_revoked(token_id: str, expires: float) -> ClusterState:
    log = Log()
    assert log(RevokeToken(token_id, expires, NOW, by="root")) == 1
    return log.state


def test_a_revoked_token_is_refused_even_from_the_cache() -> None:
    state = ClusterState()
    auth = _auth(state=state)
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=600, gid=100, token_id="t-1")
    assert isinstance(_call(auth, "/spur.v1.Controller/GetJobs", token), Identity)  # now cached
    state.domains["revocation"].apply(RevokeToken("t-1", NOW + 600, NOW))
    refused = _call(auth, "/spur.v1.Controller/GetJobs", token)
    assert isinstance(refused, Refusal) and refused.code == "UNAUTHENTICATED" and "revoked" in refused.message


def test_revocation_domain_applies_prunes_and_round_trips() -> None:
    log = Log()
    assert log(RevokeToken("a", NOW + 100, NOW)) == 1
    assert log(RevokeToken("b", NOW + 50, NOW)) == 2
    assert log(RevokeToken("old", NOW - 1, NOW)) == 3  # already expired: nothing to keep
    domain = log.state.domains["revocation"]
    assert domain.revoked() == {"a": NOW + 100, "b": NOW + 50}
    assert domain.is_revoked("a") and not domain.is_revoked("old") and not domain.is_revoked(None)
    assert log(RevokeToken("c", NOW + 500, NOW + 60)) == 4  # b expired by then: pruned
    assert domain.revoked() == {"a": NOW + 100, "c": NOW + 500}
    bad = log(RevokeToken("", NOW + 5, NOW))
    assert isinstance(bad, Rejected) and bad.code == "INVALID_ARGUMENT"
    assert domain.version == 4 and domain.revoked() == {"a": NOW + 100, "c": NOW + 500}
    snap = log.state.snapshot()
    fresh = ClusterState()
    fresh.restore(snap)
    restored = fresh.domains["revocation"]
    assert isinstance(restored, RevocationDomain)
    assert restored.revoked() == domain.revoked() and restored.version == 4
    assert fresh.snapshot() == snap
    assert log.replay().domains["revocation"].revoked() == domain.revoked()
    old = ClusterState()
    old.domains["revocation"].restore(None)  # a snapshot from before the domain existed
    assert old.domains["revocation"].revoked() == {} and old.domains["revocation"].version == 0


def test_learnt_deny_list_forgets_expired_entries() -> None:
    clock = Clock()
    learnt = LearntDenyList(clock)
    learnt.replace(3, {"a": NOW + 10, "gone": NOW - 1})
    assert learnt.version == 3 and len(learnt) == 1
    assert learnt.is_revoked("a") and not learnt.is_revoked("gone") and not learnt.is_revoked(None)
    clock.now += 11
    assert not learnt.is_revoked("a") and len(learnt) == 0


def test_an_agent_polls_the_deny_list_and_refuses_what_it_learnt() -> None:
    from spur.agent.revocations import poll_once

    state = _state_with_revoked("t-9", NOW + 600)
    svc = AuthService(_auth(state=state), state=state)
    calls = []

    async def call(name, request, *, service=None):
        calls.append(request.since_version)
        return await getattr(svc, name)(request, None)

    learnt = LearntDenyList(Clock())
    agent = _auth(audience="agent")
    agent.denylist = learnt

    async def main():
        assert await poll_once(call, learnt) is True
        assert await poll_once(call, learnt) is False  # unchanged: nothing sent back

    trio.run(main)
    assert calls == [0, 1]
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=600, gid=100, token_id="t-9")
    refused = _call(agent, "/spur.v1.Agent/StreamOutput", token)
    assert isinstance(refused, Refusal) and "revoked" in refused.message


# ---------------------------------------------------------------- the Auth service


class Context:
    def __init__(self, identity: Identity) -> None:
        self.identity = identity


ALICE = Identity(1001, 100, "alice", "users", verified=True)
ADMIN = Identity(1002, 100, "ops", "users", admin=True, verified=True)


def _service(**settings):
    state = ClusterState()
    proposed = []

    async def propose(cmd):
        proposed.append(cmd)
        return state.domains["revocation"].apply(cmd)

    auth = _auth(state=state, **settings)
    return AuthService(auth, state=state, propose=propose), proposed


def _run(coro_fn, *args):
    return trio.run(coro_fn, *args)


def _code(fn, *args) -> StatusCode:
    with pytest.raises(RpcError) as info:
        _run(fn, *args)
    return info.value.code


def test_mint_needs_a_user_admin_for_others_and_caps_the_lifespan() -> None:
    svc, _ = _service(max_token_lifespan=7200, token_ttl_secs=3600)
    own = _run(svc.MintToken, auth_pb2.MintTokenRequest(), Context(ALICE))
    claims = verify(KEY, own.token, now=NOW)
    assert claims.user == "alice" and claims.gid == 100 and claims.token_id == own.token_id
    assert claims.expires_at - claims.issued_at == 3600 and not claims.admin
    assert _code(svc.MintToken, auth_pb2.MintTokenRequest(username="root"), Context(ALICE)) is (
        StatusCode.PERMISSION_DENIED
    )
    assert _code(svc.MintToken, auth_pb2.MintTokenRequest(admin=True), Context(ALICE)) is (
        StatusCode.PERMISSION_DENIED
    )
    for who in (_daemon("controller"), _daemon("agent")):
        assert _code(svc.MintToken, auth_pb2.MintTokenRequest(), Context(who)) is StatusCode.PERMISSION_DENIED
    with pytest.raises(RpcError) as info:
        _run(svc.MintToken, auth_pb2.MintTokenRequest(lifespan_secs=7201), Context(ADMIN))
    assert info.value.code is StatusCode.INVALID_ARGUMENT and "max_token_lifespan" in info.value.message
    root = _run(svc.MintToken, auth_pb2.MintTokenRequest(username="root", admin=True), Context(ADMIN))
    assert verify(KEY, root.token, now=NOW).admin


def test_revoke_by_id_needs_an_admin_and_by_token_needs_its_owner() -> None:
    svc, proposed = _service()
    alice = _run(svc.MintToken, auth_pb2.MintTokenRequest(), Context(ALICE))
    request = auth_pb2.RevokeTokenRequest(token_id=alice.token_id)
    assert _code(svc.RevokeToken, request, Context(ALICE)) is StatusCode.PERMISSION_DENIED
    other = mint(KEY, "bob", 1003, now=NOW, ttl_secs=60, gid=100)
    assert _code(svc.RevokeToken, auth_pb2.RevokeTokenRequest(token=other), Context(ALICE)) is (
        StatusCode.PERMISSION_DENIED
    )
    forged = mint(b"another-key-0123456789abcdef012345", "alice", 1001, now=NOW, ttl_secs=60)
    assert _code(svc.RevokeToken, auth_pb2.RevokeTokenRequest(token=forged), Context(ALICE)) is (
        StatusCode.INVALID_ARGUMENT
    )
    assert proposed == []
    done = _run(svc.RevokeToken, auth_pb2.RevokeTokenRequest(token=alice.token), Context(ALICE))
    assert done.token_id == alice.token_id and done.expires_at == alice.expires_at
    by_id = _run(svc.RevokeToken, auth_pb2.RevokeTokenRequest(token_id="abc"), Context(ADMIN))
    assert by_id.expires_at >= NOW + svc.auth.settings.max_token_lifespan
    assert [c.token_id for c in proposed] == [alice.token_id, "abc"]
    listed = _run(svc.ListRevoked, auth_pb2.ListRevokedRequest(), Context(ADMIN))
    assert listed.changed and {t.token_id for t in listed.tokens} == {alice.token_id, "abc"}


def test_cli_tells_join_tokens_from_user_tokens_and_reads_a_token_id() -> None:
    from spur.cli.token import is_join_token, token_id

    assert is_join_token("548468") and is_join_token("62f3cb") and is_join_token("62f3cb." + "a" * 32)
    jwt_token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=60, token_id="c0ffee" * 5 + "aa")
    assert not is_join_token("c0ffee" * 5 + "aa") and not is_join_token(jwt_token)
    assert token_id(jwt_token) == "c0ffee" * 5 + "aa"
    assert token_id("not-a-token") is None and token_id("a.b.c") is None


def test_an_agent_keeps_fetching_the_deny_list_through_failures(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from trio.testing import MockClock

    from spur.agent.revocations import VersionHint, follow_revocations

    answers = [RpcError(StatusCode.UNAVAILABLE, "no leader"), RpcError(StatusCode.UNAVAILABLE, "still none")]
    learnt = LearntDenyList(Clock())

    async def call(name, request, *, service=None):
        if answers:
            raise answers.pop(0)
        return auth_pb2.ListRevokedResponse(
            version=2, changed=True, tokens=[auth_pb2.RevokedToken(token_id="x", expires_at=NOW + 60)]
        )

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(follow_revocations, call, learnt, VersionHint())
            await trio.sleep(25)
            nursery.cancel_scope.cancel()

    with caplog.at_level(logging.WARNING, logger="spur.agent.revocations"):
        trio.run(main, clock=MockClock(autojump_threshold=0))
    assert learnt.version == 2 and learnt.is_revoked("x")
    warnings = [r for r in caplog.records if "deny-list" in r.getMessage()]
    assert len(warnings) == 1  # one line per failure streak


def test_an_agent_fetches_the_deny_list_only_when_a_heartbeat_names_another_version() -> None:
    from trio.testing import MockClock

    from spur.agent.revocations import VersionHint, follow_revocations

    server = {"version": 0, "tokens": {}}
    asked: list[int] = []
    learnt = LearntDenyList(Clock())
    hint = VersionHint()

    async def call(name, request, *, service=None):
        asked.append(request.since_version)
        if request.since_version == server["version"]:
            return auth_pb2.ListRevokedResponse(version=server["version"], changed=False)
        return auth_pb2.ListRevokedResponse(
            version=server["version"],
            changed=True,
            tokens=[auth_pb2.RevokedToken(token_id=t, expires_at=e) for t, e in server["tokens"].items()],
        )

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(follow_revocations, call, learnt, hint)
            await trio.sleep(300)  # many heartbeats naming the same version: no fetch after the first
            for _ in range(10):
                hint.announce(0)
            await trio.sleep(1)
            assert asked == [0]
            server["version"], server["tokens"] = 1, {"t1": NOW + 600}
            hint.announce(1)
            await trio.sleep(1)
            assert learnt.version == 1 and learnt.is_revoked("t1") and asked == [0, 0]
            hint.announce(0)  # a stale heartbeat answered by a lagging view: one check, no loop
            await trio.sleep(60)
            assert len(asked) == 3
            nursery.cancel_scope.cancel()

    trio.run(main, clock=MockClock(autojump_threshold=0))
