"""No work before authentication on the REST port: an ASGI gate in front of the Quart app.

Contracts (:class:`PreAuthGate`), for every HTTP request that carries a body (``Content-Length`` > 0 or a
``Transfer-Encoding``), from its headers alone and before one byte of the body is read:

- The caller is named and authenticated exactly as the views do it (:func:`spur.rest.auth.metadata_from_headers`,
  then the controller's ``[auth]`` policy through :meth:`spur.rest.adapter.ServiceAdapter.authorize`). A
  401 (no user, unknown user, missing or invalid credential where one is required) is answered at once with
  Slurm's error body and ``Connection: close``; the body is never read, parsed or validated. Only
  UNAUTHENTICATED refusals are answered here; whether an authenticated caller may do what it asks is
  still decided by the view, with the method it calls.
- A ``Content-Length`` over ``max_body_bytes`` is answered 413 (``Connection: close``) before the body is
  read. A body sent without a length is cut at the same limit while it streams (Quart's
  ``MAX_CONTENT_LENGTH``: 413 and the connection closed), also before it is parsed.
- Requests without a body (GET, DELETE) and WebSocket upgrades pass through: their views authenticate
  before doing anything.

The refusal costs one header parse and one policy check; with Hypercorn's bounded app queue, the unread
body is not buffered beyond a few socket reads before the connection is closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import orjson
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from spur.rest.auth import metadata_from_headers, resolve_local_user
from spur.rest.errors import RestError, body
from spur.rest.limits import too_large

__all__ = ["PreAuthGate", "Authorizer"]

ASGIApp = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Awaitable[None]]

SOURCE = "rest_authentication"


class Authorizer(Protocol):
    """Runs the controller's auth policy on a call made from the given metadata; raises RestError."""

    async def authenticate(self, method: str, metadata: dict[str, str], peer: str, source: str) -> None: ...


class PreAuthGate:
    """The ASGI wrapper (see the module docstring)."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer, max_body_bytes: int) -> None:
        self.app = app
        self.authorizer = authorizer
        self.max_body_bytes = max_body_bytes
        self.refused = 0  # requests answered here, for tests and benchmarks

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        length = _content_length(headers)
        if not (length or "transfer-encoding" in headers):
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        refusal = await self._refusal(headers, length, scope, path)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self.refused += 1
        payload = orjson.dumps(body(path.startswith("/slurmdb"), [refusal.entry()]))
        await send(
            {
                "type": "http.response.start",
                "status": refusal.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    async def _refusal(
        self, headers: dict[str, str], length: int | None, scope: HTTPScope, path: str
    ) -> RestError | None:
        try:
            metadata = metadata_from_headers(headers, resolve_local_user, SOURCE)
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else "rest"
            await self.authorizer.authenticate(
                f"/spur.rest/{scope.get('method', '')} {path}", metadata, peer, SOURCE
            )
        except RestError as exc:
            if exc.status == 401:
                return exc
        if length is not None and length > self.max_body_bytes:
            return too_large(self.max_body_bytes, SOURCE)
        return None


def _headers(scope: HTTPScope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        out[name.decode("latin-1").lower()] = value.decode("latin-1")
    return out


def _content_length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length")
    if raw is None:
        return None
    try:
        return max(0, int(raw.strip()))
    except ValueError:
        return None
