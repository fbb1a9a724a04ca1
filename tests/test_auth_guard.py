"""The daemons' interceptor logic (spur.auth.guard.ServerAuth) with an injected clock."""

from __future__ import annotations

import logging

import pytest

from spur.auth.guard import DAEMON_TOKEN_TTL_SECS, ServerAuth
from spur.auth.keys import AuthSettings
from spur.auth.policy import Refusal
from spur.auth.tokens import mint, verify

KEY = b"guard-test-key-0123456789abcdef0123"
CLAIM = {"x-spur-uid": "1001", "x-spur-user": "alice"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Groups:
    """A two-user password database: alice (primary 100, also in 200)."""

    def is_member(self, user: str, gid: int) -> bool:
        return user == "alice" and gid in (100, 200)

    def primary_gid(self, user: str) -> int | None:
        return 100 if user == "alice" else None

    def group_name(self, gid: int) -> str | None:
        return {100: "users", 200: "proj"}.get(gid)


def _auth(mode: str, clock: Clock, key: bytes | None = KEY, audience: str = "controller") -> ServerAuth:
    return ServerAuth(
        AuthSettings(mode=mode, key=key),
        daemon_name="spurctld",
        clock=clock,
        log_interval=60,
        daemon_audience=audience,
        groups=Groups(),
    )


def test_a_token_is_verified_once_and_forgotten_when_it_expires() -> None:
    clock = Clock()
    auth = _auth("required", clock)
    token = mint(KEY, "alice", 1001, now=clock.now, ttl_secs=120)
    md = {**CLAIM, "authorization": f"Bearer {token}"}
    for _ in range(50):
        ident = auth.authenticate("/spur.v1.Controller/GetJobs", md, "peer")
        assert ident.uid == 1001 and ident.verified
    assert len(auth._cache._entries) == 1
    clock.now += 121
    refused = auth.authenticate("/spur.v1.Controller/GetJobs", md, "peer")
    assert isinstance(refused, Refusal) and "expired" in refused.message
    assert not auth._cache._entries


def test_permissive_logs_unauthenticated_calls_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    auth = _auth("permissive", clock)
    with caplog.at_level(logging.INFO, logger="spur.auth"):
        for _ in range(5):
            assert auth.authenticate("/spur.v1.Controller/GetJobs", CLAIM, "10.0.0.7:4000").uid == 1001
        clock.now += 61
        auth.authenticate("/spur.v1.Controller/GetJobs", CLAIM, "10.0.0.7:4000")
    lines = [r.getMessage() for r in caplog.records if "unauthenticated" in r.getMessage()]
    assert lines == [
        "unauthenticated call to /spur.v1.Controller/GetJobs from 10.0.0.7:4000 as uid 1001 (auth.mode = permissive)",
        "unauthenticated call to /spur.v1.Controller/GetJobs from 10.0.0.7:4000 as uid 1001 "
        "(auth.mode = permissive) (4 more since the last message)",
    ]


def test_refusals_are_logged_without_the_token(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    auth = _auth("required", clock)
    token = mint(b"some-other-key-0123456789abcdef012", "alice", 1001, now=clock.now, ttl_secs=60)
    with caplog.at_level(logging.INFO, logger="spur.auth"):
        refused = auth.authenticate("/spur.v1.Controller/GetJobs", {"authorization": f"Bearer {token}"}, "p")
    assert isinstance(refused, Refusal) and refused.code == "UNAUTHENTICATED"
    assert caplog.records and all(token not in r.getMessage() for r in caplog.records)
    assert all(KEY.decode() not in r.getMessage() for r in caplog.records)


def test_daemon_token_has_its_audience_no_admin_and_is_renewed_before_it_expires() -> None:
    clock = Clock()
    auth = _auth("required", clock)
    first = auth.daemon_metadata()["authorization"].split()[1]
    claims = verify(KEY, first, now=clock.now)
    assert claims.user == "spurctld" and not claims.admin and claims.audience == "controller"
    agent = verify(
        KEY, _auth("required", clock, audience="agent").daemon_metadata()["authorization"][7:], now=clock.now
    )
    assert agent.audience == "agent" and not agent.admin
    assert claims.expires_at - clock.now == DAEMON_TOKEN_TTL_SECS
    assert auth.daemon_metadata()["authorization"].split()[1] == first
    clock.now += DAEMON_TOKEN_TTL_SECS * 0.7
    renewed = auth.daemon_metadata()["authorization"].split()[1]
    assert renewed != first and verify(KEY, renewed, now=clock.now).expires_at > clock.now + 200
    assert _auth("permissive", clock, key=None).daemon_metadata() == {}
