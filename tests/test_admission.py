"""Node admission: token format, hashing, durations, and the replicated ``admission`` domain."""

from __future__ import annotations

import pytest

from spur.core import admission as adm
from spur.core.admission import (
    TokenFormatError,
    format_duration,
    hash_secret,
    new_credential,
    new_token,
    parse_duration,
    parse_token,
    secret_matches,
)
from spur.state.admission import (
    AdmissionDomain,
    AdmitNode,
    CreateAdmissionToken,
    RevokeAdmissionToken,
    token_state,
)
from spur.state.machine import ClusterState, Rejected
from tests.state_helpers import Log

SECRET = "0123456789abcdef0123456789abcdef"


# ---------------------------------------------------------------- token format and durations


def test_new_token_has_the_documented_format():
    token_id, secret = new_token()
    assert parse_token(f"{token_id}.{secret}") == (token_id, secret)
    assert len(token_id) == 6 and len(secret) == 32
    assert new_token() != new_token()
    assert len(new_credential()) == 64


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "0a1b2c",
        "0a1b2c.",
        "0a1b2c.short",
        "0a1b2.0123456789abcdef0123456789abcdef",
        "zzzzzz.0123456789abcdef0123456789abcdef",
        "0a1b2c.0123456789abcdef0123456789abcdeg",
    ],
)
def test_malformed_tokens_are_one_clear_error_without_the_secret(text):
    with pytest.raises(TokenFormatError) as exc:
        parse_token(text)
    assert "<6 hex id>.<32+ hex secret>" in str(exc.value)
    if len(text) > 7:
        assert text[7:] not in str(exc.value)


def test_token_parsing_is_case_and_space_tolerant():
    assert parse_token(f"  0A1B2C.{SECRET.upper()}\n") == ("0a1b2c", SECRET)


def test_hash_and_constant_time_compare():
    h = hash_secret(SECRET)
    assert len(h) == 64 and h != SECRET
    assert secret_matches(h, hash_secret(SECRET))
    assert not secret_matches(h, hash_secret(SECRET[:-1] + "0"))
    assert not secret_matches("", "")
    assert not secret_matches(h, "")


@pytest.mark.parametrize(
    ("text", "secs"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("24h", 86400),
        ("7d", 604800),
        ("2w", 1209600),
        ("1.5h", 5400),
        ("0", 0),
        (" 24H ", 86400),
    ],
)
def test_durations(text, secs):
    assert parse_duration(text) == secs


@pytest.mark.parametrize("text", ["", "h", "-1h", "24x", "1 day", "1h30m", "abc"])
def test_bad_durations_are_one_clear_error(text):
    with pytest.raises(TokenFormatError, match=r"invalid duration .*e\.g\. 30m, 24h, 7d"):
        parse_duration(text)


def test_format_duration():
    assert format_duration(0) == "0s"
    assert format_duration(90061) == "1d1h"
    assert format_duration(2700) == "45m"


# ---------------------------------------------------------------- the domain


def create(log: Log, token_id="0a1b2c", *, created=100.0, expires=0.0, uses=None, secret=SECRET):
    return log(CreateAdmissionToken(token_id, hash_secret(secret), created, expires, uses, "root"))


def admit(log: Log, node="n1", token_id="0a1b2c", *, secret=SECRET, time=200.0, credential="c" * 64):
    return log(AdmitNode(node, token_id, hash_secret(secret), hash_secret(credential), time))


def domain(log: Log) -> AdmissionDomain:
    d = log.state.domains["admission"]
    assert isinstance(d, AdmissionDomain)
    return d


def test_log_entries_hold_hashes_never_secrets():
    log = Log()
    create(log)
    admit(log, credential="d" * 64)
    for entry in log.entries:
        assert SECRET.encode() not in entry and b"d" * 64 not in entry
    assert SECRET.encode() not in log.state.snapshot()


def test_admission_consumes_uses_until_exhausted():
    log = Log()
    create(log, uses=2)
    assert admit(log, "n1") is True
    assert admit(log, "n2") is True
    refused = admit(log, "n3")
    assert isinstance(refused, Rejected) and refused.code == "PERMISSION_DENIED"
    assert "join token 0a1b2c has no uses left" in refused.message
    assert "spur token create" in refused.message
    token = domain(log).token("0a1b2c")
    assert token.uses_left == 0 and token.used == 2
    assert "n3" not in domain(log).credentials
    assert token_state(token, 300.0) == "exhausted"


def test_unlimited_token_and_credentials_per_node():
    log = Log()
    create(log)
    for i in range(5):
        assert admit(log, f"n{i}", credential=f"{i}" * 64) is True
    d = domain(log)
    assert d.token("0a1b2c").uses_left is None and d.token("0a1b2c").used == 5
    assert d.credential_ok("n3", hash_secret("3" * 64))
    assert not d.credential_ok("n3", hash_secret("4" * 64))
    assert not d.credential_ok("nobody", hash_secret("3" * 64))


def test_expiry_uses_the_time_stamped_in_the_command():
    log = Log()
    create(log, created=100.0, expires=160.0)
    assert admit(log, "n1", time=159.9) is True
    refused = admit(log, "n2", time=160.0)
    assert isinstance(refused, Rejected) and "join token 0a1b2c has expired" in refused.message
    # replaying the log gives the same answer whatever the wall clock says now
    replayed = log.replay().domains["admission"]
    assert set(replayed.credentials) == {"n1"}


def test_revoked_token_refuses_and_revoke_of_unknown_is_not_found():
    log = Log()
    create(log)
    assert admit(log, "n1") is True
    token = log(RevokeAdmissionToken("0a1b2c", 150.0))
    assert token.revoked and token.revoked_time == 150.0
    refused = admit(log, "n2")
    assert isinstance(refused, Rejected) and "join token 0a1b2c was revoked" in refused.message
    assert not domain(log).credential_ok("n1", hash_secret("c" * 64))  # its credentials die with it
    missing = log(RevokeAdmissionToken("ffffff", 150.0))
    assert isinstance(missing, Rejected) and missing.code == "NOT_FOUND"


def test_wrong_secret_and_unknown_id_get_the_same_refusal():
    log = Log()
    create(log)
    wrong = admit(log, "n1", secret="f" * 32)
    unknown = admit(log, "n1", token_id="ffffff")
    assert isinstance(wrong, Rejected) and isinstance(unknown, Rejected)
    assert "is not valid for this cluster" in wrong.message
    assert "is not valid for this cluster" in unknown.message
    assert domain(log).token("0a1b2c").used == 0


def test_duplicate_and_invalid_creations_change_nothing():
    log = Log()
    create(log)
    dup = create(log, secret="e" * 32)
    assert isinstance(dup, Rejected) and dup.code == "ALREADY_EXISTS"
    assert domain(log).token("0a1b2c").secret_hash == hash_secret(SECRET)
    assert isinstance(create(log, "111111", uses=0), Rejected)
    assert isinstance(create(log, "222222", created=100.0, expires=50.0), Rejected)
    assert isinstance(create(log, "bad"), Rejected)
    assert [t.token_id for t in domain(log).list_tokens()] == ["0a1b2c"]


def test_snapshot_round_trip_and_old_snapshots_start_empty():
    log = Log()
    create(log, uses=3)
    admit(log, "n1")
    log(RevokeAdmissionToken("0a1b2c", 300.0))
    fresh = ClusterState()
    fresh.restore(log.state.snapshot())
    d = fresh.domains["admission"]
    assert d.token("0a1b2c") == domain(log).token("0a1b2c")
    assert d.credentials == domain(log).credentials
    import json

    body = json.loads(log.state.snapshot())
    del body["domains"]
    old = ClusterState()
    old.restore(json.dumps(body).encode())
    assert old.domains["admission"].tokens == {}


def test_checks_go_through_the_constant_time_compare(monkeypatch):
    import hmac

    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(adm.hmac, "compare_digest", spy)
    log = Log()
    create(log)
    assert admit(log, "n1") is True
    assert len(calls) == 1
    assert domain(log).credential_ok("n1", hash_secret("c" * 64))
    assert len(calls) == 2


# ---------------------------------------------------------------- spur token create arguments


def test_create_arguments():
    from spur.cli.node_tokens import UsageError, parse_create_args

    assert parse_create_args([]) == (86400.0, None, "")
    assert parse_create_args(["--ttl", "30m", "--uses=2", "--description", "rack 4"]) == (1800.0, 2, "rack 4")
    assert parse_create_args(["--ttl=0"]) == (0.0, None, "")
    for bad, message in (
        (["--uses", "0"], "invalid --uses '0'"),
        (["--uses", "99999999999"], "expected a whole number from 1 to 1000000"),
        (["--ttl", "tomorrow"], "--ttl: invalid duration 'tomorrow'"),
        (["--ttl"], "--ttl needs a value"),
        (["--forever"], "unknown option '--forever'"),
    ):
        with pytest.raises(UsageError, match=message):
            parse_create_args(bad)


def test_token_table_never_shows_a_secret():
    from spur.cli.node_tokens import format_table
    from spur.rpc.proto import admission_pb2 as apb

    info = apb.TokenInfo(id="0a1b2c", state="active", used=1, creator="root", created=1.0, expires=0.0)
    info.uses_left = 2
    lines = format_table([info, apb.TokenInfo(id="ffffff", state="revoked", created=1.0)]).splitlines()
    assert lines[0].split() == [
        "ID",
        "STATE",
        "USES_LEFT",
        "USED",
        "EXPIRES",
        "CREATED",
        "CREATOR",
        "DESCRIPTION",
    ]
    assert lines[1].split()[:5] == ["0a1b2c", "active", "2", "1", "never"]
    assert lines[2].split()[:3] == ["ffffff", "revoked", "unlimited"]
