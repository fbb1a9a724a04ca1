"""The [auth] mode rules (spur.auth.policy), table-driven, and the admin decision."""

from __future__ import annotations

import pytest

from spur.auth.admin import is_admin
from spur.auth.identity import ANONYMOUS, Identity
from spur.auth.policy import Authenticated, Refusal, authenticate, authorize, bearer_token
from spur.auth.tokens import Claims, TokenError

ALICE = Claims(user="alice", uid=1001, issued_at=0, expires_at=1e12, gid=100)
CLAIM_ALICE = {"x-spur-uid": "1001", "x-spur-gid": "100", "x-spur-user": "alice", "x-spur-group": "staff"}
CLAIM_ROOT = {"x-spur-uid": "0", "x-spur-user": "root"}
BAD = TokenError("token signature does not verify")

# (mode, has_key, presented, verification, claimed) -> expected: an identity (uid, verified), or a code
CASES = [
    # disabled: claimed identity, credentials ignored
    ("disabled", False, False, None, CLAIM_ALICE, (1001, False)),
    ("disabled", True, True, BAD, CLAIM_ALICE, (1001, False)),
    ("disabled", False, False, None, {"x-spur-uid": "abc"}, "UNAUTHENTICATED"),
    ("disabled", False, False, None, {}, (-1, False)),
    # permissive
    ("permissive", True, False, None, CLAIM_ALICE, (1001, False)),
    ("permissive", True, True, ALICE, CLAIM_ALICE, (1001, True)),
    ("permissive", True, True, BAD, CLAIM_ALICE, "UNAUTHENTICATED"),
    ("permissive", False, True, None, CLAIM_ALICE, "UNAUTHENTICATED"),  # no key: a credential is refused
    ("permissive", True, True, ALICE, CLAIM_ROOT, "PERMISSION_DENIED"),  # claimed uid disagrees
    ("permissive", True, True, ALICE, {"x-spur-uid": "1001", "x-spur-user": "root"}, "PERMISSION_DENIED"),
    ("permissive", True, True, ALICE, {}, (1001, True)),  # no claimed headers: the token's identity
    # required
    ("required", True, False, None, CLAIM_ALICE, "UNAUTHENTICATED"),
    ("required", True, False, None, CLAIM_ROOT, "UNAUTHENTICATED"),
    ("required", True, True, BAD, CLAIM_ALICE, "UNAUTHENTICATED"),
    ("required", True, True, ALICE, CLAIM_ALICE, (1001, True)),
    ("required", True, True, ALICE, CLAIM_ROOT, "PERMISSION_DENIED"),
    ("required", True, True, ALICE, {"x-spur-uid": "1001", "x-spur-gid": "0"}, "PERMISSION_DENIED"),
]


@pytest.mark.parametrize(("mode", "has_key", "presented", "verification", "claimed", "expected"), CASES)
def test_authenticate(mode, has_key, presented, verification, claimed, expected) -> None:
    result = authenticate(
        mode=mode, has_key=has_key, presented=presented, verification=verification, claimed=claimed
    )
    if isinstance(expected, str):
        assert isinstance(result, Refusal) and result.code == expected, result
    else:
        assert isinstance(result, Authenticated), result
        assert (result.identity.uid, result.identity.verified) == expected
        assert result.unauthenticated == (mode == "permissive" and not presented)


def test_verified_identity_takes_gid_and_admin_from_the_token() -> None:
    admin = Claims(user="ops", uid=2000, issued_at=0, expires_at=1e12, admin=True, gid=2000)
    result = authenticate(mode="required", has_key=True, presented=True, verification=admin, claimed={})
    assert isinstance(result, Authenticated)
    assert result.identity == Identity(2000, 2000, "ops", "2000", admin=True, verified=True)
    assert is_admin(result.identity)


def test_refusal_messages_say_why() -> None:
    none = authenticate(
        mode="required", has_key=True, presented=False, verification=None, claimed=CLAIM_ALICE
    )
    assert isinstance(none, Refusal) and "no credential" in none.message and "SLURM_JWT" in none.message
    nokey = authenticate(mode="permissive", has_key=False, presented=True, verification=None, claimed={})
    assert isinstance(nokey, Refusal) and "auth.jwt_key" in nokey.message
    other = authenticate(
        mode="required", has_key=True, presented=True, verification=ALICE, claimed=CLAIM_ROOT
    )
    assert isinstance(other, Refusal) and "disagrees" in other.message and "alice" in other.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Basic abc", TokenError),
        ("Bearer", TokenError),
    ],
)
def test_bearer_token(value, expected) -> None:
    md = {} if value is None else {"authorization": value}
    got = bearer_token(md)
    if expected is TokenError:
        assert isinstance(got, TokenError)
    else:
        assert got == expected


USER = Identity(1001, 100, "alice", "staff", verified=True)
ROOT = Identity(0, 0, "root", "root")
ADMIN_TOKEN = Identity(1001, 100, "alice", "staff", admin=True, verified=True)
UNVERIFIED_ADMIN = Identity(1001, 100, "alice", "staff", admin=True, verified=False)


@pytest.mark.parametrize(
    ("method", "who", "mode", "allowed"),
    [
        ("/spur.v1.Controller/SubmitJob", USER, "required", True),
        ("/spur.v1.Controller/UpdateNode", USER, "disabled", False),
        ("/spur.v1.Controller/UpdateNode", ROOT, "disabled", True),
        ("/spur.v1.Controller/Reconfigure", ADMIN_TOKEN, "required", True),
        ("/spur.v1.Controller/Reconfigure", UNVERIFIED_ADMIN, "permissive", False),
        ("/spur.v1.Controller/RegisterNode", USER, "permissive", True),
        ("/spur.v1.Controller/RegisterNode", USER, "required", False),
        ("/spur.v1.Controller/RegisterNode", ANONYMOUS, "disabled", True),
        ("/spur.v1.Agent/LaunchJob", USER, "required", False),
        ("/spur.v1.Agent/LaunchJob", ADMIN_TOKEN, "required", True),
        ("/spur.v1.Agent/SignalJob", ROOT, "required", True),
        ("/spur.v1.Agent/LaunchStep", USER, "required", True),
    ],
)
def test_authorize(method, who, mode, allowed) -> None:
    refusal = authorize(method, who, mode=mode)
    assert (refusal is None) == allowed
    if refusal is not None:
        assert refusal.code == "PERMISSION_DENIED"
        assert refusal.message.startswith("Access/permission denied: ")
        assert method.rsplit("/", 1)[1] in refusal.message or "scontrol" in refusal.message
        assert "alice" in refusal.message or "uid" in refusal.message


def test_a_job_runs_only_in_its_users_groups() -> None:
    from spur.agent.launchspec import UserInfo, job_gid

    alice = UserInfo("alice", 1001, 100, "/home/alice", "/bin/sh", (100, 200))
    assert job_gid(200, alice) == 200  # a supplementary group (after newgrp)
    assert job_gid(100, alice) == 100
    assert job_gid(0, alice) == 100  # not hers: her primary group instead
