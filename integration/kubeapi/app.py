"""The HTTP face of the double: a quart-trio app served by hypercorn's Trio worker.

``KubeAPI`` owns a ``Store`` and serves it the way kube-apiserver does for the calls kubectl and
Spur make: ``/version``, legacy discovery, CRUD, ``/status``, ``pods/eviction``, list + watch
(newline-delimited events, resume, 410, bookmarks), server-side Tables for ``kubectl get``.
Start it in-process with ``await nursery.start(api.serve)`` (returns the base URL) or as a
process with ``python -m integration.kubeapi --port N``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from integration.kubeapi import errors
from integration.kubeapi.attach import container_argv, interactive_container, pick_protocol
from integration.kubeapi.errors import ApiError
from integration.kubeapi.kubelet import Kubelet
from integration.kubeapi.protowire import ProtoError, decode_object
from integration.kubeapi.resources import (
    ResourceType,
    openapi_group_version,
    openapi_root,
    parse_resource_path,
)
from integration.kubeapi.runtime import attach_process
from integration.kubeapi.store import Store
from integration.kubeapi.tables import to_table
from integration.kubeapi.watch import bookmark, encode_event, event_for

log = logging.getLogger("kubeapi")

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-spur-double",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

PROTOBUF = "application/vnd.kubernetes.protobuf"
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _truthy(value: str | None) -> bool:
    return value in ("true", "1", "True")


class KubeAPI:
    """An in-memory Kubernetes API server.

    ``token``: when set, a request presenting any other ``Authorization`` gets 401. A request with
    no credential is let through: kubectl (client-go) never sends a bearer token over plain http,
    and the double serves plain http.
    ``bookmark_interval``: seconds between BOOKMARK events on watches that allow them.
    ``history``: how many changes a watch can resume across before 410 Expired.
    ``logs_dir``: where node-side log files are, as kubelet keeps them: ``pods/log`` of pod
    ``ns/name`` serves ``<logs_dir>/<ns>_<name>.log`` (after anything ``Kubelet.write_log`` added).
    ``exec_env_dir``: ``pods/exec`` (kubectl exec, over WebSocket ``v5``/``v4.channel.k8s.io``) runs
    the command on this machine, as that pod's container would, with the environment of
    ``<exec_env_dir>/<ns>_<name>.env`` (``KEY=VALUE`` lines) over the double's own; without the file
    (or without this option) exec answers 400, as for a pod whose container cannot run commands.
    ``interactive_pods``: play kubelet for pods whose container takes stdin (``kubectl run -it``):
    report them Running when created, and run their command on this machine when ``pods/attach``
    comes (see ``attach.py``; the environment of ``exec_env_dir``'s file for the pod when there is one).
    ``requests`` records ``(method, path?query, content-type)`` of every request (``user_agents`` its User-Agent), for tests that
    check what a client sent; ``bodies`` the request bodies (as received) of the requests that
    carried one, in order.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        bookmark_interval: float = 1.0,
        history: int = 10000,
        workloads: bool = True,
        graceful_pods: bool = False,
        clock: Any = time.time,
        logs_dir: Path | None = None,
        exec_env_dir: Path | None = None,
        interactive_pods: bool = False,
    ) -> None:
        self.token = token
        self.logs_dir = logs_dir
        self.exec_env_dir = exec_env_dir
        self.interactive_pods = interactive_pods
        self.bookmark_interval = bookmark_interval
        self.clock = clock
        self._changed = trio.Event()
        self.store = Store(
            clock=clock, history=history, workloads=workloads, graceful_pods=graceful_pods, notify=self._wake
        )
        self.kubelet = Kubelet(self.store, clock)
        self.requests: list[tuple[str, str, str]] = []
        self.user_agents: list[str] = []  # the User-Agent of each entry of ``requests``
        self.bodies: list[bytes] = []
        self._attached: set[str] = set()  # uids of the pods whose process an attach started
        self.url: str | None = None
        self.app = self._build_app()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def serve(
        self, host: str = "127.0.0.1", port: int = 0, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; ``task_status.started`` gets the base URL (``http://host:port``)."""
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("kubeapi.hypercorn")
        config.graceful_timeout = 0.1

        async def started_hook(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            await serve(self.app, config, task_status=task_status)

        async with trio.open_nursery() as nursery:
            binds = await nursery.start(started_hook)
            self.url = binds[0]
            task_status.started(self.url)

    # ------------------------------------------------------------------ the app

    def _build_app(self) -> Any:
        from quart import request
        from quart_trio import QuartTrio

        app = QuartTrio("kubeapi")
        app.config["RESPONSE_TIMEOUT"] = None
        app.config["BODY_TIMEOUT"] = None
        app.config["MAX_CONTENT_LENGTH"] = 16 * 1024 * 1024

        @app.websocket("/api/v1/namespaces/<ns>/pods/<name>/exec")
        async def exec_ws(ns: str, name: str) -> Any:
            from quart import websocket

            self.requests.append(("GET", f"/api/v1/namespaces/{ns}/pods/{name}/exec", "websocket"))
            self.user_agents.append(websocket.headers.get("User-Agent", ""))
            env_file = (self.exec_env_dir / f"{ns}_{name}.env") if self.exec_env_dir is not None else None
            try:
                self.store.get(self.store.registry.by_key("", "pods"), ns, name)
            except ApiError as exc:
                return self._json(exc.status(), exc.code)
            if env_file is None or not env_file.exists():
                return self._json(
                    ApiError(400, "BadRequest", f"cannot exec in pod {ns}/{name}").status(), 400
                )
            offered = [p.strip() for p in (websocket.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
            protocol = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
            if protocol is None:
                return self._json(ApiError(400, "BadRequest", "no supported exec protocol").status(), 400)
            await websocket.accept(subprotocol=protocol)
            command = websocket.args.getlist("command")
            env = dict(os.environ)
            for line in env_file.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    env[key] = value
            proc = await trio.run_process(
                command, env=env, capture_stdout=True, capture_stderr=True, check=False
            )
            if proc.stdout:
                await websocket.send(b"\x01" + proc.stdout)
            if proc.stderr:
                await websocket.send(b"\x02" + proc.stderr)
            if proc.returncode == 0:
                status = {"metadata": {}, "status": "Success"}
            else:
                status = {
                    "metadata": {},
                    "status": "Failure",
                    "message": f"command terminated with non-zero exit code: {proc.returncode}",
                    "reason": "NonZeroExitCode",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(proc.returncode)}]},
                }
            await websocket.send(b"\x03" + json.dumps(status).encode())
            await websocket.close(1000)
            return None

        @app.websocket("/api/v1/namespaces/<ns>/pods/<name>/attach")
        async def attach_ws(ns: str, name: str) -> Any:
            from quart import websocket

            self.requests.append(("GET", f"/api/v1/namespaces/{ns}/pods/{name}/attach", "websocket"))
            self.user_agents.append(websocket.headers.get("User-Agent", ""))
            try:
                pod = self.store.get(self.store.registry.by_key("", "pods"), ns, name)
            except ApiError as exc:
                return self._json(exc.status(), exc.code)
            container = interactive_container(pod, websocket.args.get("container"))
            phase = (pod.get("status") or {}).get("phase")
            if (
                not self.interactive_pods
                or container is None
                or phase != "Running"
                or pod["metadata"].get("uid") in self._attached
            ):
                return self._json(
                    ApiError(400, "BadRequest", f"cannot attach to pod {ns}/{name}").status(), 400
                )
            protocol = pick_protocol(websocket.headers.get("Sec-WebSocket-Protocol"))
            if protocol is None:
                return self._json(ApiError(400, "BadRequest", "no supported attach protocol").status(), 400)
            self._attached.add(pod["metadata"].get("uid"))
            await websocket.accept(subprotocol=protocol)
            code = await attach_process(
                websocket,
                container_argv(container),
                self._pod_env(ns, name),
                stdin=_truthy(websocket.args.get("stdin")),
            )
            await websocket.close(1000)
            try:
                self.kubelet.set_pod_phase(ns, name, "Succeeded" if code == 0 else "Failed", exit_code=code)
            except ApiError:
                pass  # deleted meanwhile
            return None

        @app.route("/", defaults={"path": ""}, methods=_METHODS)
        @app.route("/<path:path>", methods=_METHODS)
        async def handle(path: str) -> Any:
            query = request.query_string.decode()
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            self.requests.append((request.method, "/" + path + (f"?{query}" if query else ""), content_type))
            self.user_agents.append(request.headers.get("User-Agent", ""))
            try:
                presented = request.headers.get("Authorization")
                if self.token is not None and presented is not None and presented != f"Bearer {self.token}":
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                body = (
                    await request.get_data() if request.method in ("POST", "PUT", "PATCH", "DELETE") else b""
                )
                self.bodies.append(body)
                if content_type == PROTOBUF and body:
                    try:
                        body = json.dumps(decode_object(body)).encode()
                    except ProtoError as exc:
                        raise ApiError(415, "UnsupportedMediaType", str(exc)) from None
                elif content_type not in (
                    "",
                    "application/json",
                    "application/yaml",
                ) and not content_type.endswith("patch+json"):
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format ({content_type}) - accepted "
                        "media types include: application/json, application/yaml",
                    )
                return await self._dispatch(
                    request.method,
                    "/" + path,
                    request.args,
                    request.headers.get("Accept", ""),
                    content_type,
                    body,
                )
            except ApiError as exc:
                return self._json(exc.status(), exc.code)

        return app

    def _pod_env(self, ns: str, name: str) -> dict[str, str]:
        """The environment a pod's process gets here: ours, plus ``exec_env_dir``'s file for it."""
        env = dict(os.environ)
        env_file = (self.exec_env_dir / f"{ns}_{name}.env") if self.exec_env_dir is not None else None
        if env_file is not None and env_file.exists():
            for line in env_file.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    env[key] = value
        return env

    @staticmethod
    def _json(obj: Any, code: int = 200) -> Any:
        return json.dumps(obj), code, {"Content-Type": "application/json"}

    async def _dispatch(
        self, method: str, path: str, args: Any, accept: str, content_type: str, raw: bytes
    ) -> Any:
        registry = self.store.registry
        if method == "GET":
            if path == "/version":
                return self._json(VERSION)
            if path in ("/healthz", "/readyz", "/livez"):
                return "ok", 200, {"Content-Type": "text/plain"}
            if path == "/openapi/v3":
                return self._json(openapi_root(registry))
            if path.startswith("/openapi/v3/"):
                rest = path[len("/openapi/v3/") :].split("/")
                doc = None
                if len(rest) == 2 and rest[0] == "api":
                    doc = openapi_group_version(registry, "", rest[1])
                elif len(rest) == 3 and rest[0] == "apis":
                    doc = openapi_group_version(registry, rest[1], rest[2])
                if doc is not None:
                    return self._json(doc)
            if path == "/api":
                return self._json(registry.api_versions())
            if path == "/apis":
                return self._json(registry.api_group_list())
            parts = [p for p in path.split("/") if p]
            if len(parts) == 2 and parts[0] == "api":
                found = registry.resource_list("", parts[1])
                if found is not None:
                    return self._json(found)
            if len(parts) == 2 and parts[0] == "apis":
                found = registry.api_group(parts[1])
                if found is not None:
                    return self._json(found)
            if len(parts) == 3 and parts[0] == "apis":
                found = registry.resource_list(parts[1], parts[2])
                if found is not None:
                    return self._json(found)
        rp = parse_resource_path(path)
        rt = registry.get(rp.group, rp.version, rp.plural) if rp else None
        if rp is None or rt is None or (rp.namespace and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = rp.namespace if rt.namespaced else None
        body = self._body(raw, method)
        store = self.store
        want_table = "as=Table" in accept
        strict = args.get("fieldValidation") == "Strict"
        if rp.name is None:
            if method == "GET":
                if _truthy(args.get("watch")):
                    return await self._watch(rt, ns, args, want_table)
                items, rv = store.list(rt, ns, args.get("labelSelector"), args.get("fieldSelector"))
                if want_table:
                    return self._json(
                        to_table(rt, items, rv, self.clock(), args.get("includeObject", "Metadata"))
                    )
                return self._json(
                    {
                        "kind": f"{rt.kind}List",
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(rv)},
                        "items": items,
                    }
                )
            if method == "POST":
                created = store.create(rt, ns, body, strict=strict)
                if self.interactive_pods and rt.key == ("", "pods") and interactive_container(created):
                    self.kubelet.set_pod_phase(ns or "", created["metadata"]["name"], "Running")
                return self._json(created, 201)
            if method == "DELETE":
                gone = store.delete_collection(rt, ns, args.get("labelSelector"), args.get("fieldSelector"))
                return self._json(
                    {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": {}, "items": gone}
                )
            raise errors.method_not_allowed()
        sub = rp.subresource
        if sub == "eviction":
            if method != "POST" or rt.key != ("", "pods"):
                raise errors.method_not_allowed()
            return self._json(store.evict(ns or "", rp.name, body), 201)
        if sub == "token" and rt.key == ("", "serviceaccounts"):
            if method != "POST":
                raise errors.method_not_allowed()
            return self._json(service_account_token(store.get(rt, ns, rp.name), body, self.clock()), 201)
        if sub == "log" and rt.key == ("", "pods") and method == "GET":
            store.get(rt, ns, rp.name)  # 404 for a pod that does not exist
            text = store.pod_logs.get((ns or "", rp.name), "")
            if self.logs_dir is not None and (self.logs_dir / f"{ns}_{rp.name}.log").exists():
                text += (self.logs_dir / f"{ns}_{rp.name}.log").read_text(errors="replace")
            if args.get("tailLines"):
                lines = text.splitlines(keepends=True)
                text = "".join(lines[-int(args["tailLines"]) :]) if int(args["tailLines"]) > 0 else ""
            return text, 200, {"Content-Type": "text/plain"}
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "status" and not rt.status_subresource:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            obj = store.get(rt, ns, rp.name)
            if want_table and sub is None:
                return self._json(
                    to_table(
                        rt, [obj], store.resource_version, self.clock(), args.get("includeObject", "Metadata")
                    )
                )
            return self._json(obj)
        if method == "PUT":
            return self._json(store.update(rt, ns, rp.name, body, subresource=sub, strict=strict))
        if method == "PATCH":
            return self._json(
                store.patch(rt, ns, rp.name, content_type, body, subresource=sub, strict=strict)
            )
        if method == "DELETE" and sub is None:
            options = dict(body) if isinstance(body, dict) else {}
            if args.get("gracePeriodSeconds") is not None and options.get("gracePeriodSeconds") is None:
                options["gracePeriodSeconds"] = int(args["gracePeriodSeconds"])
            obj, _gone = store.delete(rt, ns, rp.name, options)
            return self._json(obj)
        raise errors.method_not_allowed()

    @staticmethod
    def _body(raw: bytes, method: str) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            pass
        try:
            import yaml

            return yaml.safe_load(raw)
        except Exception:
            raise errors.bad_request(f"the {method} body is not valid JSON or YAML") from None

    # ------------------------------------------------------------------ watch

    async def _watch(self, rt: ResourceType, ns: str | None, args: Any, want_table: bool) -> Any:
        store = self.store
        labels, fields = store.selectors(rt, args.get("labelSelector"), args.get("fieldSelector"))
        rv_arg = args.get("resourceVersion") or ""
        bookmarks = _truthy(args.get("allowWatchBookmarks"))
        timeout = float(args["timeoutSeconds"]) if args.get("timeoutSeconds") else None
        include = args.get("includeObject", "Metadata")
        initial: list[dict[str, Any]] = []
        if rv_arg in ("", "0"):
            initial, since = store.list(rt, ns, args.get("labelSelector"), args.get("fieldSelector"))
        else:
            try:
                since = int(rv_arg)
            except ValueError:
                raise errors.bad_request(f"invalid resourceVersion {rv_arg!r}") from None

        def render(kind: str, obj: dict[str, Any]) -> bytes:
            if want_table and kind in ("ADDED", "MODIFIED", "DELETED"):
                obj = to_table(
                    rt, [obj], int(obj["metadata"].get("resourceVersion", since)), self.clock(), include
                )
            return encode_event(kind, obj)

        async def stream() -> AsyncIterator[bytes]:
            nonlocal since
            for obj in initial:
                yield render("ADDED", obj)
            deadline = trio.current_time() + timeout if timeout is not None else None
            while True:
                wake = self._changed
                try:
                    # read the history and the version it reaches together: yielding below lets
                    # other tasks write, and their changes must wait for the next round
                    changes = store.changes_since(since)
                    reached = store.resource_version
                except ApiError as exc:
                    yield encode_event("ERROR", exc.status())
                    return
                for change in changes:
                    since = change.rv
                    if change.key != rt.key or (ns is not None and change.namespace != ns):
                        continue
                    event = event_for(change, labels, fields)
                    if event is not None:
                        yield render(*event)
                since = max(since, reached)
                wait = self.bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - trio.current_time()
                    if left <= 0:
                        return
                    wait = left if wait is None else min(wait, left)
                woke = False
                with trio.move_on_after(wait if wait is not None else float("inf")):
                    await wake.wait()
                    woke = True
                if not woke and bookmarks and store.resource_version == since:
                    yield encode_event("BOOKMARK", bookmark(rt.api_version, rt.kind, since))

        return stream(), 200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}


def service_account_token(sa: dict[str, Any], body: Any, now: float) -> dict[str, Any]:
    """A TokenRequest answered for ServiceAccount ``sa`` (an opaque random token; no signing)."""
    import secrets
    from datetime import UTC, datetime

    spec = dict((body or {}).get("spec") or {})
    secs = int(spec.get("expirationSeconds") or 3600)
    spec["expirationSeconds"] = secs
    meta = sa["metadata"]
    expires = datetime.fromtimestamp(now + secs, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "")},
        "spec": spec,
        "status": {
            "token": f"sa.{meta.get('namespace', '')}.{meta['name']}.{secrets.token_hex(16)}",
            "expirationTimestamp": expires,
        },
    }
