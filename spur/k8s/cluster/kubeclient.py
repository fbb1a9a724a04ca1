"""A small blocking Kubernetes API client built from a kubeconfig (the k0s admin one).

Used from Trio through ``trio.to_thread.run_sync``: cordon/drain for ``remove-nodes`` and the
ServiceAccount objects behind per-user kubeconfigs. Supports a bearer token or a client
certificate, and the cluster CA from ``certificate-authority-data``. Credentials never appear in
errors.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml


class KubeError(Exception):
    """The API could not be reached or answered an error; ``status`` is the HTTP code (0: none)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class KubeTarget:
    server: str
    ca_data: bytes | None
    token: str | None
    client_cert: bytes | None
    client_key: bytes | None


def parse_kubeconfig(text: str) -> KubeTarget:
    """The current context's server and credentials. Raises KubeError on a malformed kubeconfig."""
    try:
        doc = yaml.safe_load(text) or {}
        ctx_name = doc.get("current-context")
        contexts = {c["name"]: c["context"] for c in doc.get("contexts", [])}
        ctx = contexts.get(ctx_name) or next(iter(contexts.values()))
        cluster = {c["name"]: c["cluster"] for c in doc["clusters"]}[ctx["cluster"]]
        user = {u["name"]: u.get("user") or {} for u in doc.get("users", [])}.get(ctx.get("user"), {})
    except Exception:  # noqa: BLE001 (any malformed shape is the same error to the user)
        raise KubeError("the cluster's admin kubeconfig could not be parsed") from None

    def b64(key: str, where: dict) -> bytes | None:
        value = where.get(key)
        return base64.b64decode(value) if value else None

    return KubeTarget(
        server=str(cluster["server"]).rstrip("/"),
        ca_data=b64("certificate-authority-data", cluster),
        token=user.get("token"),
        client_cert=b64("client-certificate-data", user),
        client_key=b64("client-key-data", user),
    )


class KubeClient:
    def __init__(self, target: KubeTarget, timeout: float = 15.0) -> None:
        self.target = target
        self.timeout = timeout
        self._ssl: ssl.SSLContext | None = None
        if target.server.startswith("https://"):
            ctx = ssl.create_default_context()
            if target.ca_data:
                try:
                    ctx.load_verify_locations(cadata=target.ca_data.decode())
                except (ssl.SSLError, ValueError, UnicodeDecodeError):
                    raise KubeError("the cluster CA in the admin kubeconfig is not a valid certificate") from None
            if target.client_cert and target.client_key:
                with tempfile.TemporaryDirectory() as d:
                    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
                    for path, data in ((cert, target.client_cert), (key, target.client_key)):
                        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
                        os.write(fd, data)
                        os.close(fd)
                    ctx.load_cert_chain(cert, key)
            self._ssl = ctx

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        """The decoded JSON answer; KubeError (with the HTTP status) otherwise."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.target.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.target.token:
            req.add_header("Authorization", f"Bearer {self.target.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message", exc.reason)
            except ValueError:
                message = exc.reason
            raise KubeError(f"{method} {path}: {exc.code} {message}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise KubeError(f"the Kubernetes API at {self.target.server} is not reachable: "
                            f"{getattr(exc, 'reason', exc)}") from None
        return json.loads(raw) if raw else {}

    def ensure(self, path: str, obj: dict) -> dict:
        """Create ``obj`` under collection ``path`` unless it exists (409 -> fetch it)."""
        try:
            return self.request("POST", path, obj)
        except KubeError as exc:
            if exc.status != 409:
                raise
            return self.request("GET", f"{path}/{urllib.parse.quote(obj['metadata']['name'])}")
