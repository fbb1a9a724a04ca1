"""A thin Kubernetes API client on httpx (Trio backend), for exactly the calls the operator makes.

Why not lightkube: its AsyncClient runs on Trio for plain calls, but its retry path
(``on_error``) calls ``asyncio.sleep`` and connection errors bypass it; the operator needs a handful
of verbs (get, list, watch, create, merge-patch, delete) and must own its retry and timeout policy,
which a few lines over httpx give directly.

Contracts: every non-2xx answer raises :class:`KubeError` with the HTTP status and the API's
``Status.reason``/``message``; a connection failure raises :class:`KubeUnavailable`. :meth:`watch`
yields ``(type, object)`` pairs of one newline-delimited watch, skips BOOKMARKs (their resourceVersion
still moves the caller's :class:`WatchCursor`), and raises :class:`WatchExpired` on a 410 so the caller
lists again. :func:`watch_from` is the watch the operator's loops use: it resumes a watch that ended or
dropped from the last resourceVersion seen, as client-go's reflector does, so a dropped connection
costs no list and misses no event; only a 410 sends the caller back to list.
Tokens never appear in errors or logs.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

__all__ = [
    "KubeClient",
    "KubeConfig",
    "KubeError",
    "KubeUnavailable",
    "WatchCursor",
    "WatchExpired",
    "path_of",
    "watch_from",
]

log = logging.getLogger("spur.k8s.operator.kube")

USER_AGENT = "spur-k8s-operator/0.1"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class KubeUnavailable(KubeError):
    """The API server could not be reached."""


class WatchExpired(KubeError):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass
class WatchCursor:
    """Where a watch has got to: the resourceVersion of the last event or bookmark it delivered.
    One per watch loop (never shared between concurrent watches)."""

    version: str


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is and how to authenticate; token and CA are read at start."""

    server: str
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None

    @classmethod
    def resolve(
        cls,
        server: str | None,
        token_file: str | None,
        environ: Mapping[str, str],
        *,
        ca_file: str | None = None,
    ) -> KubeConfig:
        """``--kube-api``/``SPUR_KUBE_API`` if given (verified with ``ca_file``, ``--kube-ca``, when
        given, else the system's CAs), else the in-cluster service (``KUBERNETES_SERVICE_HOST``/``_PORT``
        and the service account's token and CA). Raises ValueError for a ``ca_file`` that is not a file."""
        if ca_file is not None and not Path(ca_file).is_file():
            raise ValueError(f"--kube-ca {ca_file}: no such file")
        token_path = Path(token_file) if token_file else SERVICE_ACCOUNT_DIR / "token"
        token = token_path.read_text().strip() if token_path.is_file() else None
        if token is None and environ.get("SPUR_KUBE_TOKEN"):
            token = environ["SPUR_KUBE_TOKEN"]
        if server:
            return cls(server.rstrip("/"), token, ca_file)
        host = environ.get("KUBERNETES_SERVICE_HOST")
        if not host:
            raise ValueError(
                "no Kubernetes API: outside a cluster pass --kube-api URL (or set SPUR_KUBE_API)"
            )
        port = environ.get("KUBERNETES_SERVICE_PORT", "443")
        host = f"[{host}]" if ":" in host else host
        ca = SERVICE_ACCOUNT_DIR / "ca.crt"
        in_cluster_ca = str(ca) if ca.is_file() else None
        return cls(f"https://{host}:{port}", token, ca_file or in_cluster_ca)


def path_of(
    *,
    group: str = "",
    version: str = "v1",
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    sub: str | None = None,
) -> str:
    """The API path of a collection or object (``group`` "" is the core API)."""
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
        if sub:
            base += f"/{sub}"
    return base


class KubeClient:
    def __init__(self, config: KubeConfig, *, timeout: float = 30.0) -> None:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self.http = httpx.AsyncClient(
            base_url=config.server,
            headers=headers,
            verify=_verify(config.ca_file),
            timeout=httpx.Timeout(timeout, connect=10.0),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            resp = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise KubeUnavailable(0, "Unavailable", f"{method} {path}: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 400:
            raise _error(resp.status_code, resp.content)
        return resp.json() if resp.content else {}

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self._request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, path: str, **params: str) -> dict[str, Any]:
        return await self._request("GET", path, params={k: v for k, v in params.items() if v})

    async def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self._request("POST", path, json=obj)

    async def replace(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self._request("PUT", path, json=obj)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return await self._request(
            "PATCH",
            path,
            content=json.dumps(patch).encode(),
            headers={"Content-Type": "application/merge-patch+json"},
        )

    async def delete(self, path: str, *, grace_seconds: int | None = None) -> bool:
        """Delete; False when it was already gone."""
        body: dict[str, str | int] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            await self._request("DELETE", path, json=body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def watch(
        self, path: str, cursor: WatchCursor, *, timeout_seconds: int = 300, **params: str
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The events of one watch from ``cursor.version`` (module docstring), moving the cursor past
        each event and bookmark. Ends when the server ends the watch."""
        query = {
            "watch": "true",
            "resourceVersion": cursor.version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **{k: v for k, v in params.items() if v},
        }
        try:
            async with self.http.stream(
                "GET", path, params=query, timeout=httpx.Timeout(timeout_seconds + 30, connect=10.0)
            ) as resp:
                if resp.status_code >= 400:
                    body = await resp.aread()
                    if resp.status_code == 410:
                        raise WatchExpired(410, "Expired", body.decode(errors="replace")[:200])
                    raise _error(resp.status_code, body)
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = event.get("type", ""), event.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code", 500) or 500)
                        if code == 410:
                            raise WatchExpired(410, "Expired", obj.get("message", ""))
                        raise KubeError(code, obj.get("reason", ""), obj.get("message", ""))
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        cursor.version = version
                    if kind == "BOOKMARK":
                        continue
                    yield kind, obj
        except httpx.HTTPError as exc:
            raise KubeUnavailable(0, "Unavailable", f"watch {path}: {type(exc).__name__}: {exc}") from None


async def watch_from(
    kube: KubeClient,
    path: str,
    version: str,
    *,
    backoff: float = 0.5,
    max_backoff: float = 10.0,
    timeout_seconds: int = 300,
    **params: str,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Every event of ``path`` after ``version`` (a list's resourceVersion), for as long as the caller
    iterates: a watch the server ends is started again from the last version seen, and one that drops
    (API server unreachable) is resumed from there after a backoff (doubling from ``backoff`` up to
    ``max_backoff``, reset by the next event). Raises :class:`WatchExpired` when that version has been
    compacted away (the caller lists again) and :class:`KubeError` for any other refusal.
    ``timeout_seconds`` and ``params`` go to each :meth:`KubeClient.watch`."""
    cursor = WatchCursor(version)
    delay = backoff
    while True:
        began, delivered = trio.current_time(), False
        try:
            async for kind, obj in kube.watch(path, cursor, timeout_seconds=timeout_seconds, **params):
                delay, delivered = backoff, True
                yield kind, obj
            if not delivered and trio.current_time() - began < backoff:
                await trio.sleep(backoff)  # a server ending watches at once must not make a busy loop
        except WatchExpired as exc:
            log.info("watch of %s from resourceVersion %s expired (%s); listing again", path, cursor.version, exc)
            raise
        except KubeUnavailable as exc:
            log.warning(
                "watch of %s dropped (%s); resuming from resourceVersion %s in %.1fs",
                path, exc, cursor.version, delay,
            )
            await trio.sleep(delay)
            delay = min(delay * 2, max_backoff)


def _verify(ca_file: str | None) -> Any:
    """httpx's ``verify``: a context trusting ``ca_file`` only, or the default CAs."""
    if not ca_file:
        return True
    import ssl

    return ssl.create_default_context(cafile=ca_file)


def _error(status: int, body: bytes) -> KubeError:
    reason, message = "", ""
    with contextlib.suppress(ValueError, AttributeError):
        data = json.loads(body)
        reason, message = data.get("reason", ""), data.get("message", "")
    return KubeError(status, reason or str(status), message or body.decode(errors="replace")[:200])
