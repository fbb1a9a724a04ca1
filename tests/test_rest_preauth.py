"""spur.rest.preauth: a request with a body is authenticated from its headers before one byte is read."""

from __future__ import annotations

import os
import pwd
from typing import Any

import orjson

from spur.rest.errors import SLURM_PROTOCOL_AUTHENTICATION_ERROR, RestError
from spur.rest.preauth import PreAuthGate

ME = pwd.getpwuid(os.getuid()).pw_name


class Policy:
    """The controller's policy as the gate sees it: ``Bearer good`` only, a credential required."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def authenticate(self, method: str, metadata: dict[str, str], peer: str, source: str) -> None:
        self.seen.append((method, metadata))
        if metadata.get("authorization") != "Bearer good":
            raise RestError(401, SLURM_PROTOCOL_AUTHENTICATION_ERROR, "a credential is required", source)


class Inner:
    """The wrapped app: records that it ran and reads the whole body, as Quart would."""

    def __init__(self) -> None:
        self.ran = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.ran = True
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def run(headers: dict[str, str], method: str = "POST", limit: int = 8 * 1024 * 1024):
    inner, policy = Inner(), Policy()
    gate = PreAuthGate(inner, policy, limit)
    reads: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        reads.append(1)
        return {"type": "http.request", "body": b"x" * 1024, "more_body": len(reads) < 4}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": "/slurm/v0.0.38/job/submit",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5555),
    }
    await gate(scope, receive, send)
    return inner, policy, reads, sent


async def test_unauthenticated_body_is_refused_without_reading_it():
    inner, policy, reads, sent = await run({"content-length": "8000000", "x-slurm-user-name": ME})
    assert not inner.ran and reads == []
    start, payload = sent
    assert start["status"] == 401
    assert (b"connection", b"close") in start["headers"]
    errors = orjson.loads(payload["body"])["errors"]
    assert errors[0]["error_number"] == SLURM_PROTOCOL_AUTHENTICATION_ERROR
    assert policy.seen[0][0] == "/spur.rest/POST /slurm/v0.0.38/job/submit"


async def test_no_user_named_is_401_before_the_body():
    inner, _, reads, sent = await run({"transfer-encoding": "chunked"})
    assert not inner.ran and reads == [] and sent[0]["status"] == 401


async def test_authenticated_body_over_the_limit_is_413_before_it_is_read():
    headers = {
        "content-length": str(9 * 1024 * 1024),
        "authorization": "Bearer good",
        "x-slurm-user-name": ME,
    }
    inner, _, reads, sent = await run(headers)
    assert not inner.ran and reads == []
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]


async def test_authenticated_body_reaches_the_app():
    headers = {"content-length": "4096", "authorization": "Bearer good", "x-slurm-user-name": ME}
    inner, _, reads, sent = await run(headers)
    assert inner.ran and len(reads) == 4 and sent[0]["status"] == 200


async def test_requests_without_a_body_pass_to_the_views():
    inner, policy, _, sent = await run({}, method="GET")
    assert inner.ran and policy.seen == [] and sent[0]["status"] == 200
