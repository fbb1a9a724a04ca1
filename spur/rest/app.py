"""spurctld's REST API: slurmrestd v0.0.38 (``/slurm``, ``/slurmdb``), the OpenAPI document, and the
job-output WebSocket (``/spur/v1/job/{id}/output``), as a quart-trio app on Hypercorn's Trio worker.

Requests with a body are authenticated from their headers before the body is read
(:mod:`spur.rest.preauth`). Views are thin: decode and check the request (:mod:`spur.rest.limits`, :mod:`spur.rest.auth`),
build the request message (:mod:`spur.rest.mapping`), call the ControllerService method through
:class:`spur.rest.adapter.ServiceAdapter` (the gRPC path's rules, interceptor and leader
forwarding), map the answer back. Every error is a JSON body with Slurm's ``errors[]`` and a 4xx
status (5xx only when no controller leader can be reached); a refused request changes nothing.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import orjson
import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from spur.rest import mapping, slurmdb
from spur.rest.adapter import ServiceAdapter
from spur.rest.auth import home_of, metadata_from_headers, resolve_local_user
from spur.rest.errors import (
    ESLURM_INVALID_JOB_ID,
    ESLURM_INVALID_NODE_NAME,
    ESLURM_REST_EMPTY_RESULT,
    ESLURM_REST_FAIL_PARSING,
    ESLURM_REST_INVALID_QUERY,
    SLURM_ERROR,
    RestError,
    body,
    error_entry,
    from_rpc_error,
)
from spur.rest.jobcache import RenderedJobs, RenderedList, render_answer
from spur.rest.limits import Limits, decode_body, too_large
from spur.rest.offload import off_loop
from spur.rest.openapi import SENT_AS_NULL, VERSIONS, document, document_bytes, yaml_text
from spur.rest.preauth import PreAuthGate
from spur.rest.shape import SchemaShapers
from spur.rpc.jobinfo_cache import frame
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError

if TYPE_CHECKING:
    from spur.rest.host import RestHost

log = logging.getLogger("spur.rest")

Body = dict[str, Any] | tuple[dict[str, Any], int] | Response
View = Callable[..., Awaitable[Body]]


def _json(data: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(data), status=status, content_type="application/json")


async def _each(chunks: list[bytes]) -> AsyncIterator[bytes]:
    """A response body of several chunks (an async iterator: Quart runs a plain iterable's steps in
    worker threads)."""
    for chunk in chunks:
        yield chunk


class RestApi:
    """The REST application of one controller. ``app`` is the quart-trio app; ``registered`` the
    (OpenAPI path, method) pairs served, from which the OpenAPI document is built."""

    def __init__(self, ctl: RestHost, service: Any, limits: Limits | None = None) -> None:
        self.ctl = ctl
        self.adapter = ServiceAdapter(ctl, service)
        self.limits = limits or Limits()
        self.started_at = self.ctl.clock.wall()
        self.registered: list[tuple[str, str]] = []
        self._dialects: dict[str, Any] = {}
        self._v0038_doc = document("v0.0.38")
        self._v0038_shapers = SchemaShapers(self._v0038_doc, SENT_AS_NULL["v0.0.38"], keep_undeclared=True)
        self._v0038_jobs = RenderedJobs(lambda job, cluster: orjson.dumps(mapping.job_to_slurm(job, cluster)))
        # each version's rendered jobs (each version's routes add theirs): what JobsPrerender fills
        self.job_caches: dict[str, RenderedJobs] = {"v0.0.38": self._v0038_jobs}
        self.listings = 0  # job lists a request is rendering now (JobsPrerender gives way to them)
        # told the version of each complete job list a request renders (JobsPrerender.listing)
        self.on_jobs_listed: Callable[[str], None] = lambda version: None
        app = QuartTrio("spur.rest")
        app.config["MAX_CONTENT_LENGTH"] = self.limits.max_body_bytes
        app.config["JSON_SORT_KEYS"] = False
        app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
        self.app = app
        # Every request with a body is authenticated from its headers before the body is read.
        self.gate = PreAuthGate(app.asgi_app, self, self.limits.max_body_bytes)
        app.asgi_app = self.gate  # type: ignore[method-assign]
        app.register_error_handler(HTTPException, self._http_error)
        app.register_error_handler(Exception, self._unexpected)
        self._routes()
        from spur.rest.output import register_output_route

        register_output_route(self)

    # ------------------------------------------------------------------ plumbing

    def route(
        self,
        path: str,
        method: str,
        *,
        db: bool = False,
        empty: str | None = None,
        dialect: Any = None,
        shape: bool = True,
    ) -> Callable:
        """Register a view for the OpenAPI ``path`` (``{param}`` style) and ``method``. A view
        returns a Response, or a body (a dict, or ``(dict, status)``) that is shaped by the
        version's document (:mod:`spur.rest.shape`) and sent as JSON. A RestError raised by the view
        becomes Slurm's error body (with ``empty: []`` when given); ``dialect``: the v0.0.4x version
        (None: v0.0.38). ``shape=False``: the view's body already has the declared types (the
        v0.0.38 job lists, whose mapper writes them; tests validate it), so it is sent as it is."""
        version = dialect.version if dialect is not None else "v0.0.38"
        shaper = self._shaper(version, path, method, dialect) if shape else None
        required = dialect.required_fields(path, method) if dialect is not None else []

        def decorate(view: View) -> View:
            @functools.wraps(view)
            async def handler(**kwargs: Any) -> Response:
                try:
                    await self._drain_body()
                    result = await view(**kwargs)
                    if isinstance(result, Response):
                        return result
                    status = 200
                    if isinstance(result, tuple):
                        result, status = result
                    for key in required:
                        result.setdefault(key, None)  # the shaper gives each its empty value
                    return await self._render(result, shaper, status)
                except RestError as exc:
                    if exc.status >= 500:
                        log.warning("REST %s %s: %s", method.upper(), request.path, exc)
                    extra: dict[str, list[dict[str, object]] | None] = {empty: []} if empty else {}
                    if dialect is None:
                        response = _json(body(db, [exc.entry()], **extra), exc.status)
                    else:
                        for key in required:
                            extra.setdefault(key, None)  # the shaper gives each its empty value
                        err = self.v4_body(dialect, db, errors=[exc.entry()], **extra)
                        response = await self._render(err, shaper, exc.status)
                    if exc.status == 413:  # the unread body must not be taken for the next request
                        response.headers["Connection"] = "close"
                    return response

            quart_path = path.replace("{", "<").replace("}", ">")
            endpoint = f"{method}:{path}"
            self.app.add_url_rule(quart_path, endpoint, handler, methods=[method.upper()])
            self.registered.append((path, method))
            if quart_path.endswith("/") and len(quart_path) > 1:  # slurmrestd ignores a trailing /
                self.app.add_url_rule(quart_path.rstrip("/"), endpoint + ":bare", handler, methods=[method.upper()])
            return handler

        return decorate

    def _shaper(self, version: str, path: str, method: str, dialect: Any) -> Callable[[Any], Any] | None:
        if dialect is not None:
            return dialect.response_shaper(path, method)
        item = self._v0038_doc["paths"].get(path, {}).get(method)
        if item is None:
            return None
        schema = item["responses"].get("200", {}).get("content", {}).get("application/json", {}).get("schema")
        return self._v0038_shapers.for_schema(schema) if schema is not None else None

    async def _render(self, data: dict[str, Any], shaper: Callable[[Any], Any] | None, status: int) -> Response:
        """``data`` shaped and serialised (:func:`spur.rest.jobcache.render_answer`), off the event
        loop when big. A pre-rendered job list is spliced in and sent in chunks, with the answer's
        ``Content-Length``."""
        size = max((len(v) for v in data.values() if isinstance(v, list)), default=0)
        chunks = await off_loop(lambda: render_answer(data, shaper), size)
        if len(chunks) == 1:
            return Response(chunks[0], status=status, content_type="application/json")
        response = Response(_each(chunks), status=status, content_type="application/json")
        response.content_length = sum(map(len, chunks))
        return response

    async def render_jobs(self, render: Callable[[], RenderedList], size: int,
                          complete: str | None = None) -> RenderedList:  # fmt: skip
        """``render()``, a request's rendering of ``size`` jobs: off the event loop when big
        (:func:`off_loop`), counted in :attr:`listings` while it runs. ``complete``: the version,
        when this is a complete ``GET jobs`` list (:attr:`on_jobs_listed` is told)."""
        if complete is not None:
            self.on_jobs_listed(complete)
        self.listings += 1
        try:
            return cast(RenderedList, await off_loop(render, size))
        finally:
            self.listings -= 1

    def v4_body(self, dialect: Any, db: bool, errors: list[dict] | None = None,
                warnings: list[dict] | None = None, **fields: Any) -> dict[str, Any]:  # fmt: skip
        """A v0.0.4x body: the fields, then ``meta``, ``errors`` and ``warnings`` (24.11's order)."""
        out = dict(fields)
        # slurmrestd 24.11 names the client in slurmctld's answers only
        out["meta"] = dialect.meta(db, self.cluster, *(("", "") if db else self._client_names()))
        out["errors"] = list(errors or [])
        out["warnings"] = list(warnings or [])
        return out

    async def _drain_body(self) -> None:
        """Read the whole request body up front (Quart keeps it for the view): a keep-alive
        connection must never be left with unread body bytes, whatever the view answers."""
        length = request.content_length
        if length is not None and length > self.limits.max_body_bytes:
            raise too_large(self.limits.max_body_bytes, "http")
        if length or request.headers.get("Transfer-Encoding"):
            await request.get_data(as_text=False)

    def _error_response(self, entry: dict[str, Any], status: int) -> Response:
        """An error answer outside any view, with the ``meta`` of the version the path names."""
        parts = request.path.split("/")
        version = parts[2] if len(parts) > 2 and parts[1] in ("slurm", "slurmdb") else ""
        db = parts[1] == "slurmdb" if len(parts) > 1 else False
        if version in VERSIONS[1:]:
            dialect = self._dialects.get(version)
            if dialect is None:
                from spur.rest.v004x import Dialect

                dialect = self._dialects[version] = Dialect(version)
            return _json(self.v4_body(dialect, db, errors=[entry]), status)
        return _json(body(db, [entry]), status)

    async def _http_error(self, exc: HTTPException) -> Response:
        status = exc.code or 500
        if status == 413:
            err = too_large(self.limits.max_body_bytes, "http")
            response = self._error_response(err.entry(), 413)
            response.headers["Connection"] = "close"
            return response
        number = ESLURM_REST_INVALID_QUERY if status in (404, 405) else ESLURM_REST_FAIL_PARSING
        entry = error_entry(number, f"{exc.name}: {request.method} {request.path}", "http")
        return self._error_response(entry, status)

    async def _unexpected(self, exc: Exception) -> Response:
        log.exception("REST %s %s failed", request.method, request.path)
        entry = error_entry(SLURM_ERROR, f"internal error ({type(exc).__name__})", "spur-rest")
        return self._error_response(entry, 500)

    async def authenticate(self, method: str, metadata: dict[str, str], peer: str, source: str) -> None:
        """The controller's auth policy on ``metadata`` (the pre-body gate's check); refusals -> RestError."""
        await self.adapter.authorize(CallContext(method, dict(metadata), peer, None), source)

    def identity_metadata(self, source: str) -> dict[str, str]:
        return metadata_from_headers(request.headers, resolve_local_user, source)

    async def call(self, method: str, req: Any, source: str, metadata: dict[str, str] | None = None) -> Any:
        md = metadata if metadata is not None else self.identity_metadata(source)
        return await self.adapter.call(method, req, md, request.remote_addr or "rest", source)

    async def job_frames(self, req: pb.GetJobsRequest, source: str) -> list[bytes]:
        """Each job ``GetJobs(req)`` lists, framed as in a ``GetJobsResponse``: on the leader the
        controller's kept encodings (``read_job_frames``, authorized as GetJobs), elsewhere from
        GetJobs's answer (forwarded to the leader)."""
        md = self.identity_metadata(source)
        peer = request.remote_addr or "rest"
        frames = await self.adapter.read("read_job_frames", "GetJobs", req, md, peer, source)
        if frames is not None:
            return cast(list[bytes], frames)
        resp = await self.adapter.call("GetJobs", req, md, peer, source)
        return [frame(job.SerializeToString()) for job in resp.jobs]

    async def json_body(self, source: str) -> dict[str, Any]:
        length = request.content_length
        if length is not None and length > self.limits.max_body_bytes:
            raise too_large(self.limits.max_body_bytes, source)
        raw = await request.get_data(as_text=False)
        assert isinstance(raw, bytes)
        return decode_body(raw, self.limits, source)

    def _client_names(self) -> tuple[str, str]:
        """The caller's user and group names, as 24.11's ``meta.client`` names them ("" when the
        request names no usable identity: its answer is the 401)."""
        from spur.auth.headers import GROUP_KEY, USER_KEY

        try:
            md = self.identity_metadata("meta")
        except RestError:
            return "", ""
        return md.get(USER_KEY, ""), md.get(GROUP_KEY, "")

    @property
    def cluster(self) -> str:
        return self.ctl.cfg.cluster_name

    # ------------------------------------------------------------------ routes

    def _routes(self) -> None:  # noqa: C901 - one place that lists every route
        route = self.route
        S = "/slurm/v0.0.38"
        D = "/slurmdb/v0.0.38"

        # -------------------------------------------------------------- openapi
        # The unversioned paths serve v0.0.38's document (what they always served); each version's
        # own document is at /openapi/<version> (and .json, .yaml), byte for byte as shipped.
        def serve_document(path: str, version: str, yaml: bool) -> None:
            @route(path, "get")
            async def openapi_document() -> Body:
                if yaml:
                    return Response(yaml_text(version), content_type="application/x-yaml")
                return Response(document_bytes(version), content_type="application/json")

        for path in ("/openapi/v3", "/openapi", "/openapi.json"):
            serve_document(path, "v0.0.38", False)
        serve_document("/openapi.yaml", "v0.0.38", True)
        for version in VERSIONS:
            serve_document(f"/openapi/{version}", version, False)
            serve_document(f"/openapi/{version}.json", version, False)
            serve_document(f"/openapi/{version}.yaml", version, True)

        # -------------------------------------------------------------- slurm
        @route(f"{S}/ping", "get", empty="pings")
        async def ping() -> Body:
            resp = await self.call("GetControllers", pb.Empty(), "slurm_ping")
            return body(pings=mapping.pings(resp.controllers))

        @route(f"{S}/diag", "get")
        async def diag() -> Body:
            md = self.identity_metadata("_op_handler_diag")
            resp = await self.call(
                "GetJobs", pb.GetJobsRequest(include_finished=True), "_op_handler_diag", md
            )
            stats = mapping.diag_statistics(
                resp.jobs, self.ctl.clock.wall(), self.started_at, self.counters()
            )
            return body(statistics=stats)

        @route(f"{S}/licenses", "get", empty="licenses")
        async def licenses() -> Body:
            self.identity_metadata("_op_handler_licenses")
            return body(licenses=[])

        @route(f"{S}/jobs", "get", empty="jobs", shape=False)
        async def jobs() -> Body:
            frames = await self.job_frames(pb.GetJobsRequest(), "slurm_load_jobs")
            cluster = self.cluster
            jobs = await self.render_jobs(lambda: self._v0038_jobs.render_frames(frames, cluster, True), len(frames),
                                          "v0.0.38")  # fmt: skip
            return body(jobs=jobs)

        @route(f"{S}/job/{{job_id}}", "get", empty="jobs", shape=False)
        async def get_job(job_id: str) -> Body:
            found = await self._find_jobs(job_id, "slurm_load_job")
            return body(jobs=self._v0038_jobs.fragments(found, self.cluster))

        @route(f"{S}/job/{{job_id}}", "post")
        async def update_job(job_id: str) -> Body:
            source = "slurm_update_job"
            md = self.identity_metadata(source)
            jid, task = mapping.parse_job_id(job_id, source)
            req = mapping.update_to_request(jid, task, await self.json_body(source), source)
            await self.call("UpdateJob", req, source, md)
            return body()

        @route(f"{S}/job/{{job_id}}", "delete")
        async def cancel_job(job_id: str) -> Body:
            source = "slurm_kill_job"
            md = self.identity_metadata(source)
            req = mapping.cancel_request(job_id, request.args.get("signal"), request.args.get("flags"), source)
            await self.call("CancelJob", req, source, md)
            return body()

        @route(f"{S}/job/submit", "post")
        async def submit() -> Body:
            source = "slurm_submit_batch_job"
            md = self.identity_metadata(source)
            spec = mapping.submit_to_spec(await self.json_body(source), home_of(md["x-spur-user"]), source)
            resp = await self.call("SubmitJob", pb.SubmitJobRequest(spec=spec), source, md)
            return body(job_id=resp.job_id, step_id="BATCH", job_submit_user_msg="")

        @route(f"{S}/nodes", "get", empty="nodes")
        async def nodes() -> Body:
            resp = await self.call("GetNodes", pb.GetNodesRequest(), "slurm_load_node")
            return body(nodes=[mapping.node_to_slurm(n) for n in resp.nodes])

        @route(f"{S}/node/{{node_name}}", "get", empty="nodes")
        async def node(node_name: str) -> Body:
            source = "slurm_load_node_single"
            md = self.identity_metadata(source)
            if not node_name or any(ch in node_name for ch in "[],"):
                raise RestError(404, ESLURM_INVALID_NODE_NAME, f"Unable to find node {node_name}", source)
            resp = await self.call("GetNodes", pb.GetNodesRequest(names=[node_name]), source, md)
            return body(nodes=[mapping.node_to_slurm(n) for n in resp.nodes])

        @route(f"{S}/partitions", "get", empty="partitions")
        async def partitions() -> Body:
            return body(partitions=await self._partitions([], "slurm_load_partitions"))

        @route(f"{S}/partition/{{partition_name}}", "get", empty="partitions")
        async def partition(partition_name: str) -> Body:
            return body(partitions=await self._partitions([partition_name], "slurm_load_partitions"))

        @route(f"{S}/reservations", "get", empty="reservations")
        async def reservations() -> Body:
            self.identity_metadata("_op_handler_reservations")
            return body(reservations=[])

        @route(f"{S}/reservation/{{reservation_name}}", "get", empty="reservations")
        async def reservation(reservation_name: str) -> Body:
            source = "_op_handler_reservation"
            self.identity_metadata(source)
            raise RestError(
                404, ESLURM_REST_EMPTY_RESULT, f"Unable to find reservation {reservation_name}", source
            )

        # -------------------------------------------------------------- slurmdb
        @route(f"{D}/jobs", "get", db=True, empty="jobs")
        async def db_jobs() -> Body:
            source = "op_handler_jobs"
            resp = await self.call("GetJobs", pb.GetJobsRequest(include_finished=True), source)
            keep = mapping.slurmdb_job_filter(request.args)
            now, cluster = self.ctl.clock.wall(), self.cluster
            return body(True, jobs=[mapping.job_to_slurmdb(j, cluster, now) for j in resp.jobs if keep(j)])

        @route(f"{D}/job/{{job_id}}", "get", db=True, empty="jobs")
        async def db_job(job_id: str) -> Body:
            found = await self._find_jobs(job_id, "op_handler_job", db=True)
            now = self.ctl.clock.wall()
            return body(True, jobs=[mapping.job_to_slurmdb(j, self.cluster, now) for j in found])

        @route(f"{D}/config", "get", db=True)
        async def db_config() -> Body:
            out = await self.config_entities("op_handler_config")
            out["tres"] = [out["tres"]]  # 22.05's document declares a list of TRES lists
            return body(True, **out)

        @route(f"{D}/diag", "get", db=True)
        async def db_diag() -> Body:
            self.identity_metadata("op_handler_diag")
            rpcs = [
                {"rpc": name, "count": count, "time": {"average": avg_us, "total": total_us}}
                for name, count, avg_us, total_us in self.rpc_stats()
            ]
            stats = {"time_start": int(self.started_at), "rollups": [], "RPCs": rpcs, "users": []}
            return body(True, statistics=stats)

        self._entity_routes()

    async def config_entities(self, source: str) -> dict[str, Any]:
        """The standard TRES and every accounting entity the backend lists (empty lists without
        an accounting backend)."""
        md = self.identity_metadata(source)
        backend = getattr(self.ctl, "accounting_backend", None)
        out: dict[str, Any] = {"tres": [dict(t) for t in mapping.STANDARD_TRES]}
        for key, method, to_json in (
            ("accounts", "list_accounts", slurmdb.account_to_json),
            ("associations", "list_associations", slurmdb.association_to_json),
            ("users", "list_users", slurmdb.user_to_json),
            ("qos", "list_qos", slurmdb.qos_to_json),
            ("wckeys", "list_wckeys", slurmdb.wckey_to_json),
        ):
            fn = getattr(backend, method, None)
            if fn is None:
                out[key] = []
                continue
            args = (slurmdb.AssociationFilter(),) if key == "associations" else ()
            records = await self._backend_call(fn, md, source, *args)
            out[key] = [to_json(r) for r in records]
        return out

    def _entity_routes(self) -> None:
        """The slurmdb accounting-entity routes the accounting backend implements (none without one)."""
        backend = getattr(self.ctl, "accounting_backend", None)
        if backend is None:
            return
        for entity in slurmdb.ENTITY_ROUTES:
            fn = getattr(backend, entity.backend_method, None)
            if fn is not None:
                self.entity_route(entity, fn)

    def entity_route(
        self,
        entity: slurmdb.EntityRoute,
        fn: Callable[..., Awaitable[Any]],
        *,
        path: str | None = None,
        dialect: Any = None,
        ok: Callable[..., dict[str, Any]] | None = None,
        key: str | None = None,
    ) -> None:
        """Register ``entity`` at ``path`` (default: its v0.0.38 path) for ``dialect`` (None:
        v0.0.38); ``ok`` builds the version's success body."""
        source = f"op_handler_{entity.backend_method}"
        path = path or entity.path
        list_key = key if key is not None else entity.key
        param_name = path.rsplit("{", 1)[1].rstrip("}/") if "{" in path else entity.param

        def answer(**fields: Any) -> dict[str, Any]:
            return ok(True, **fields) if ok is not None else body(True, **fields)

        @self.route(path, entity.method, db=True, empty=list_key or None, dialect=dialect)
        async def view(**params: str) -> Body:
            md = self.identity_metadata(source)
            if entity.kind == "list":
                records = await self._backend_call(fn, md, source)
            elif entity.kind == "filter_list":
                records = await self._backend_call(fn, md, source, slurmdb.association_filter(request.args))
            elif entity.kind == "get":
                name = params[param_name]
                found = await self._backend_call(fn, md, source, name)
                if found is None:
                    raise RestError(404, ESLURM_REST_EMPTY_RESULT, f"Nothing found for {name!r}", source)
                records = [found]
            else:
                if entity.kind == "add":
                    raw = await self.json_body(source)
                    if dialect is not None:  # number objects -> plain numbers for the v0.0.38 parsers
                        from spur.rest.v004x import plain_numbers

                        raw = plain_numbers(raw)
                    await self._backend_call(fn, md, source, entity.parse(raw, source))
                elif entity.kind == "delete":
                    await self._backend_call(fn, md, source, params[param_name])
                else:  # filter_delete
                    await self._backend_call(fn, md, source, slurmdb.association_filter(request.args))
                return answer()
            items = [entity.to_json(r) for r in records]
            if dialect is not None:  # slurmdbd 24.11's values (spur.rest.v004x.entities)
                from spur.rest.v004x import entities

                nodes = None
                if entity.key == "clusters":
                    nodes = (await self.call("GetNodes", pb.GetNodesRequest(), source, md)).nodes
                items = entities(entity.key, items, request.args, dialect.version, nodes)
            return answer(**{list_key: items})

    async def _backend_call(
        self, fn: Callable[..., Awaitable[Any]], md: dict[str, str], source: str, *args: Any
    ) -> Any:
        """Run an accounting backend method for the caller (``md``); its RpcError refusals ->
        RestError. The backend reaches the controller through ``ServiceAdapter.call`` (or the same
        interceptor), which authenticates ``md``; nothing is served here without that."""
        try:
            return await fn(md, request.remote_addr or "rest", *args)
        except RpcError as exc:
            raise from_rpc_error(exc, source) from None

    # ------------------------------------------------------------------ helpers

    async def _find_jobs(self, job_id: str, source: str, db: bool = False) -> list[pb.JobInfo]:
        md = self.identity_metadata(source)
        jid, task = mapping.parse_job_id(job_id, source)
        resp = await self.call("GetJobs", pb.GetJobsRequest(job_ids=[jid], include_finished=True), source, md)
        found = [
            j for j in resp.jobs if task is None or (j.HasField("array_task_id") and j.array_task_id == task)
        ]
        if not found:
            raise RestError(404, ESLURM_INVALID_JOB_ID, f"Unable to find JobId={job_id}", source)
        return found

    async def _partitions(self, names: list[str], source: str) -> list[dict[str, Any]]:
        md = self.identity_metadata(source)
        parts = await self.call("GetPartitions", pb.GetPartitionsRequest(names=names), source, md)
        nodes = await self.call("GetNodes", pb.GetNodesRequest(), source, md)
        cpus = {n.name: n.cpus for n in nodes.nodes}
        return [mapping.partition_to_slurm(p, cpus) for p in parts.partitions]

    def counters(self) -> dict[str, int]:
        metrics = getattr(self.ctl, "metrics", None)
        return metrics.diag_counters() if metrics is not None else {}

    def rpc_stats(self) -> list[tuple[str, int, int, int]]:
        metrics = getattr(self.ctl, "metrics", None)
        return metrics.rpc_stats() if metrics is not None else []


async def serve_rest(
    api: RestApi,
    host: str,
    port: int,
    *,
    tls: Any = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``api`` with Hypercorn's Trio worker on ``host:port`` (0 = a free port); reports the
    bound port and serves until cancelled.

    ``tls`` (the controller's spur.rpc.tls.TlsContexts): when enabled, https only (in ``optional`` mode
    too: Hypercorn decides TLS per listener, not per connection), client certificates asked for and
    checked against the CA but not required (REST clients present none), each new connection wrapped
    with the context current then, so a reload reaches new connections."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    if tls is not None and tls.enabled:
        import ssl

        from spur.rpc.tls import ReloadingContext

        settings = tls.settings
        config.certfile, config.keyfile = str(settings.cert_file), str(settings.key_file)
        config.ca_certs = str(settings.ca_file)
        config.verify_mode = ssl.CERT_OPTIONAL
        config.ssl_handshake_timeout = settings.handshake_timeout_secs
        # Hypercorn keeps the context it is given for its listener, which only wraps connections with
        # it: the ReloadingContext stands in for an SSLContext there (see its docstring).
        reloading = cast("ssl.SSLContext", ReloadingContext(tls.rest_context))
        config.create_ssl_context = lambda: reloading  # type: ignore[method-assign]
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("spur.rest.hypercorn")
    config.websocket_max_message_size = 1024 * 1024
    config.h11_max_incomplete_size = 64 * 1024

    async def started(*, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await serve(api.app, config, task_status=task_status)

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(started)
        bound = int(binds[0].rsplit(":", 1)[1]) if binds else port
        log.info("REST API listening on %s:%d", host, bound)
        task_status.started(bound)
