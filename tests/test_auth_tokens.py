"""HS256 tokens: what verifies, what is refused, and that errors never leak the token or key."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from spur.auth.tokens import TokenError, mint, verify

KEY = b"k" * 32
NOW = 1_800_000_000.0


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_round_trip_carries_slurm_and_standard_claims() -> None:
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=300, gid=100)
    payload = jwt.decode(
        token,
        KEY,
        algorithms=["HS256"],
        options={"verify_exp": False, "verify_iat": False, "verify_aud": False},
    )
    token_id = payload.pop("jti")
    assert len(token_id) == 32 and int(token_id, 16) >= 0
    assert payload == {
        "aud": "client",
        "sun": "alice",
        "sub": "alice",
        "uid": 1001,
        "gid": 100,
        "iat": int(NOW),
        "exp": int(NOW) + 300,
    }
    claims = verify(KEY, token, now=NOW + 10)
    assert (claims.user, claims.uid, claims.gid, claims.admin) == ("alice", 1001, 100, False)
    assert claims.expires_at == NOW + 300
    assert (claims.audience, claims.token_id, claims.daemon) == ("client", token_id, False)


def test_a_token_without_aud_is_a_client_token() -> None:
    token = jwt.encode({"sun": "alice", "uid": 1001, "iat": int(NOW), "exp": int(NOW) + 60}, KEY, "HS256")
    claims = verify(KEY, token, now=NOW)
    assert (claims.audience, claims.token_id, claims.daemon) == ("client", None, False)


def test_daemon_audiences_and_raft_member() -> None:
    for aud in ("controller", "agent", "raft"):
        claims = verify(KEY, mint(KEY, "spurctld", 0, now=NOW, ttl_secs=60, audience=aud, member=2), now=NOW)
        assert (claims.audience, claims.daemon, claims.member, claims.admin) == (aud, True, 2, False)
    with pytest.raises(TokenError, match="admin claim"):
        mint(KEY, "spurctld", 0, now=NOW, ttl_secs=60, audience="controller", admin=True)
    forged = jwt.encode(
        {"sun": "spurctld", "uid": 0, "iat": int(NOW), "exp": int(NOW) + 60, "aud": "agent", "admin": True},
        KEY,
        "HS256",
    )
    with pytest.raises(TokenError, match="admin claim"):
        verify(KEY, forged, now=NOW)
    with pytest.raises(TokenError, match="audience"):
        verify(KEY, jwt.encode({"sun": "a", "uid": 1, "iat": 1, "exp": 2**40, "aud": "root"}, KEY), now=NOW)


def test_future_iat_and_lifetime_are_bounded() -> None:
    ahead = mint(KEY, "alice", 1001, now=NOW + 3600, ttl_secs=300)
    with pytest.raises(TokenError, match="in the future"):
        verify(KEY, ahead, now=NOW)
    assert verify(KEY, mint(KEY, "alice", 1001, now=NOW + 30, ttl_secs=300), now=NOW).uid == 1001
    long = mint(KEY, "alice", 1001, now=NOW, ttl_secs=10 * 365 * 86400)
    with pytest.raises(TokenError, match="max_token_lifespan"):
        verify(KEY, long, now=NOW, max_lifespan_secs=86400)
    assert verify(KEY, long, now=NOW).uid == 1001  # no bound asked for


def test_admin_claim() -> None:
    assert verify(KEY, mint(KEY, "ops", 5, now=NOW, ttl_secs=60, admin=True), now=NOW).admin


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"sub": "bob", "uid": 7, "iat": 1, "exp": 2_000_000_000}, None),  # sub alone is enough
        ({"sun": "bob", "uid": 7, "iat": 1, "exp": 2_000_000_000}, None),  # Slurm's sun alone too
        ({"uid": 7, "iat": 1, "exp": 2_000_000_000}, "user name"),
        ({"sun": "bob", "iat": 1, "exp": 2_000_000_000}, "uid"),
        ({"sun": "bob", "uid": "7", "iat": 1, "exp": 2_000_000_000}, "uid"),
        ({"sun": "bob", "uid": -1, "iat": 1, "exp": 2_000_000_000}, "uid"),
        ({"sun": "bob", "uid": 7, "iat": 1}, "'exp'"),
        ({"sun": "bob", "uid": 7, "exp": 2_000_000_000}, "'iat'"),
        ({"sun": "bob", "uid": 7, "iat": 1, "exp": int(NOW) - 1}, "expired"),
        ({"sun": "bob", "uid": 7, "iat": 1, "exp": 2_000_000_000, "admin": "yes"}, "admin"),
    ],
)
def test_claims_are_checked(payload: dict, why: str | None) -> None:
    token = jwt.encode(payload, KEY, algorithm="HS256")
    if why is None:
        assert verify(KEY, token, now=NOW).user == "bob"
        return
    with pytest.raises(TokenError, match=why):
        verify(KEY, token, now=NOW)


def test_sun_wins_over_sub() -> None:
    token = jwt.encode(
        {"sun": "a", "sub": "b", "uid": 1, "iat": 1, "exp": 2_000_000_000}, KEY, algorithm="HS256"
    )
    assert verify(KEY, token, now=NOW).user == "a"


def test_alg_none_and_other_algorithms_are_refused() -> None:
    body = _b64({"sun": "root", "uid": 0, "iat": 1, "exp": 2_000_000_000})
    with pytest.raises(TokenError, match="HS256"):
        verify(KEY, f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{body}.", now=NOW)
    hs512 = jwt.encode({"sun": "root", "uid": 0, "iat": 1, "exp": 2_000_000_000}, KEY, algorithm="HS512")
    with pytest.raises(TokenError, match="HS256"):
        verify(KEY, hs512, now=NOW)


def test_wrong_key_and_tampering_are_refused_without_leaking() -> None:
    token = mint(KEY, "alice", 1001, now=NOW, ttl_secs=300)
    with pytest.raises(TokenError) as wrong:
        verify(b"other-key", token, now=NOW)
    header, body, sig = token.split(".")
    forged_body = _b64({"sun": "root", "sub": "root", "uid": 0, "iat": int(NOW), "exp": int(NOW) + 300})
    with pytest.raises(TokenError) as forged:
        verify(KEY, f"{header}.{forged_body}.{sig}", now=NOW)
    for exc in (wrong.value, forged.value):
        text = str(exc)
        assert "signature" in text
        assert token not in text and sig not in text and KEY.decode() not in text


@pytest.mark.parametrize("garbage", ["", "x", "a.b.c", "....", "é.é.é", "x" * 9000])
def test_garbage_is_a_token_error(garbage: str) -> None:
    with pytest.raises(TokenError):
        verify(KEY, garbage, now=NOW)


def test_no_key_mints_and_verifies_nothing() -> None:
    with pytest.raises(TokenError):
        mint(b"", "a", 1, now=NOW, ttl_secs=10)
    with pytest.raises(TokenError, match="no key"):
        verify(b"", mint(KEY, "a", 1, now=NOW, ttl_secs=10), now=NOW)
