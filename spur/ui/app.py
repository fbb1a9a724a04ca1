"""The dashboard's routes on the REST app: sign-in, pages, actions, the live event stream, static files.

Contracts:

- Every path under ``/ui/`` except ``/ui/login``, ``/ui/login/link`` and ``/ui/static/`` needs a session
  (:mod:`spur.ui.sessions`); without one a page redirects to the sign-in form (303) and the event
  stream answers 401.
- Sign-in takes a Slurm JWT (``scontrol token``/``spur token``) or, from ``spur web``, a one-time link
  ``/ui/login/link?token=<JWT>``. The token is checked by the controller's auth policy exactly as a
  REST call carrying it (``[auth] mode = "required"`` refuses what it refuses); the session lives until
  the token's ``exp``. A cluster without a JWT key cannot verify tokens; there the form takes a user
  name, the same claimed identity the REST API trusts without a key.
- Each read and action is a service call with the session's credential through
  :class:`spur.rest.adapter.ServiceAdapter`; a refusal (401/403/404/409...) is shown with its message and
  changes nothing. Actions are POST forms carrying the session's CSRF token; a missing or wrong token is
  refused with 403 before anything is called.
- The job lists of the Jobs page and the Overview are authorized as ``GetJobs`` with the session's
  credential (the same check, the same refusal), then read on the leader from its applied state after
  the same read barrier, as light :class:`~spur.ui.queue.QueueJob` records (no ``JobInfo`` encoded and
  parsed per job: the page shows 200 rows of a 10,000-job queue); a follower asks GetJobs, which
  forwards to the leader.
- HTTP requests with a body under ``/ui/`` are gated from their headers before the body is read (the
  REST port's rule, :mod:`spur.rest.preauth`): a body over :data:`MAX_FORM_BYTES` is answered 413, and
  one without a live session cookie 401, except the sign-in form's.
- ``/ui/events?page=<page path>``: one server-sent-event stream per open page. The page's live part
  is rendered again after each change of the controller's state (paced by its cost, at most once a
  second, and every 15 s without a change for the charts' clock: :mod:`spur.ui.live`) and sent as a
  ``live`` event when it differs from the last one sent. On a job page the owner (or an administrator) also gets the job's output as ``output``
  events (the REST output WebSocket's messages) and an ``end`` event.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, urlsplit

import trio
from jinja2 import Environment, PackageLoader, select_autoescape
from quart import Response, request

from spur.auth.admin import is_admin
from spur.auth.identity import IdentityError, identity_from_metadata
from spur.rest.adapter import ServiceAdapter
from spur.rest.auth import metadata_from_headers, resolve_local_user
from spur.rest.errors import RestError
from spur.rpc.proto import spur_pb2 as pb
from spur.ui import live
from spur.ui import samples as smp
from spur.ui.context import ViewContext
from spur.ui.queue import FilterError, QueueJob
from spur.ui.sessions import (
    COOKIE_NAME,
    LinkLedger,
    Session,
    SessionStore,
    clear_cookie,
    csrf_ok,
    session_cookie,
)
from spur.ui.views import accounting, cluster, job, jobs, nodes, overview

if TYPE_CHECKING:
    from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

    from spur.rest.app import RestApi
    from spur.rest.preauth import ASGIApp
    from spur.state.machine import ClusterState
    from spur.ui.host import UiHost

log = logging.getLogger("spur.ui")

MAX_FORM_BYTES = 64 * 1024
# Records built, or template pieces rendered, between two checkpoints of a live page's refresh.
_SLICE = 500
SOURCE = "spur_ui"
_OPEN_PATHS = ("/ui/login", "/ui/login/link", "/ui/static/")
_NODE_ACTIONS = {"drain": "DRAIN", "resume": "RESUME"}

Page = tuple[Any, dict[str, Any]]  # (view module, its parameters)


def resolve_page(path: str) -> Page | None:
    """The view and parameters of a page path (``/ui/job/12``), None for anything else."""
    fixed = {"/ui/": overview, "/ui/jobs": jobs, "/ui/nodes": nodes, "/ui/accounting": accounting,
             "/ui/cluster": cluster}  # fmt: skip
    if path in fixed:
        return fixed[path], {}
    m = re.fullmatch(r"/ui/job/(\d{1,18})", path)
    if m:
        return job, {"job_id": int(m.group(1))}
    return None


def sse(event: str, data: str) -> str:
    """One server-sent event (``data`` split over ``data:`` lines)."""
    return f"event: {event}\n" + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


class ControllerSource:
    """The sampler's view of the controller's applied state (spur.ui.samples.SampleSource)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def node_loads(self) -> Iterator[smp.NodeLoad]:
        state = self.state
        for name in list(state.nodes):
            node = state.nodes.get(name)
            if node is None:
                continue  # removed since the sample began
            used = state.usage(name)
            yield smp.NodeLoad(node.cpus, node.cpus if used.exclusive else used.cpus, len(node.gpus),
                               len(used.gpus), node.memory_mb, used.mem_mb)  # fmt: skip

    def job_times(self) -> Iterator[smp.JobTimes]:
        for j in list(self.state.jobs.values()):
            yield smp.JobTimes(j.state._value_, j.start_time, j.end_time)


class _Gate:
    """ASGI: ``/ui/`` requests with a body are checked from their headers (module docstring); the rest
    goes to the REST app's own gate."""

    def __init__(self, ui: Dashboard, app: ASGIApp, rest_gate: ASGIApp) -> None:
        self.ui, self.app, self.rest_gate = ui, app, rest_gate

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == "/ui" or path.startswith("/ui/")):
            await self.rest_gate(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        raw_length = headers.get("content-length", "")
        length = int(raw_length) if raw_length.strip().isdigit() else None
        if length or "transfer-encoding" in headers:
            status = 0
            if length is None or length > MAX_FORM_BYTES:
                status = 413 if length is not None else 411
            elif path != "/ui/login" and self.ui.session_from_cookie(headers.get("cookie", "")) is None:
                status = 401
            if status:
                text = {401: b"sign in first", 411: b"a form needs a Content-Length",
                        413: b"form too large"}[status]  # fmt: skip
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(text)).encode()),
                                        (b"connection", b"close")]})  # fmt: skip
                await send({"type": "http.response.body", "body": text, "more_body": False})
                return
        await self.app(scope, receive, send)


class Dashboard:
    """The dashboard of one spurctld (see the module docstring)."""

    def __init__(self, api: RestApi) -> None:
        self.api = api
        self.ctl = cast("UiHost", api.ctl)  # spurctld's Controller, which serves /ui/
        self.adapters: dict[str, ServiceAdapter] = {"controller": api.adapter}
        backend = getattr(self.ctl, "accounting_backend", None)
        if backend is not None:
            self.adapters["accounting"] = backend.adapter
        # The Cluster page's k0s and mesh status, through the same auth policy as `spur k8s status`
        # and `spur net mesh` (spurctld serves both services; a bare REST host may not).
        for name, attr, path in (
            ("k8s", "k8s_service", "/spur.k8s.v1.K8sCluster/"),
            ("mesh", "mesh_service", "/spur.mesh.v1.Mesh/"),
        ):
            service = getattr(self.ctl, attr, None)
            if service is not None:
                self.adapters[name] = ServiceAdapter(self.ctl, service, path)
        self.sessions = SessionStore()
        self.links = LinkLedger()
        self.ring = smp.SampleRing()
        self.sampler = smp.Sampler(self.ring, ControllerSource(self.ctl.state), self.ctl.clock.wall)
        self.env = Environment(loader=PackageLoader("spur.ui", "templates"), autoescape=select_autoescape(["html"]))
        self.static = {
            name: resources.files("spur.ui").joinpath("static", name).read_bytes() for name in ("ui.css", "ui.js")
        }
        self.secure = bool(getattr(getattr(self.ctl, "tls", None), "enabled", False))
        app = api.app
        app.asgi_app = _Gate(self, api.gate.app, api.gate)  # type: ignore[method-assign]
        app.before_serving(self._start_sampler)
        self._routes()

    async def _start_sampler(self) -> None:
        self.api.app.add_background_task(self.sampler.run)

    # ------------------------------------------------------------------ sessions and calls

    def now(self) -> float:
        return self.ctl.clock.wall()

    def session_from_cookie(self, cookie_header: str) -> Session | None:
        for part in cookie_header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE_NAME:
                return self.sessions.get(value, self.now())
        return None

    def current_session(self) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE_NAME), self.now())

    async def call(self, session: Session, service: str, method: str, req: Any) -> Any:
        adapter = self.adapters.get(service)
        if adapter is None:
            raise RestError(404, -1, f"the {service} service is not served here", SOURCE)
        return await adapter.call(method, req, session.metadata, request.remote_addr or "ui", SOURCE)

    async def queue_jobs(self, session: Session, req: pb.GetJobsRequest) -> list[QueueJob]:
        """Light records of the jobs ``GetJobs(req)`` lists: the call is authorized as GetJobs, then
        read from this controller's state (the leader, after its read barrier) instead of encoding
        and parsing a ``JobInfo`` per job; on a follower through GetJobs itself (it forwards)."""
        jobs, infos = await self._read_jobs(session, req)
        if jobs is None:
            return [QueueJob.from_info(j) for j in infos]
        # In slices, letting the controller's other tasks run between them: with 10,000 jobs the
        # records take tens of milliseconds, which would otherwise stall every submission behind
        # each live page's refresh. ``jobs`` is a list taken at once, so the slices read one selection.
        out: list[QueueJob] = []
        for start in range(0, len(jobs), _SLICE):
            if start:
                await trio.sleep(0)
            out.extend(QueueJob.from_job(j) for j in jobs[start : start + _SLICE])
        return out

    async def job_counts(self, session: Session, req: pb.GetJobsRequest) -> Counter[tuple[str, str]]:
        """How many of the jobs ``GetJobs(req)`` lists are in each (partition, state), read as
        :meth:`queue_jobs` reads them (no record built per job)."""
        jobs, infos = await self._read_jobs(session, req)
        if jobs is not None:
            return Counter((j.partition, j.state._value_) for j in jobs)
        return Counter((j.partition, j.state) for j in infos)

    async def _read_jobs(self, session: Session, req: pb.GetJobsRequest) -> tuple[list[Any] | None, list[Any]]:
        """(the state's jobs, []) on the leader, (None, the JobInfo messages of GetJobs) elsewhere."""
        peer = request.remote_addr or "ui"
        jobs = await self.api.adapter.read("read_jobs", "GetJobs", req, session.metadata, peer, SOURCE)
        if jobs is not None:
            return jobs, []
        return None, list((await self.call(session, "controller", "GetJobs", req)).jobs)

    @property
    def has_key(self) -> bool:
        return bool(self.ctl.auth.settings.has_key)

    async def sign_in(self, token: str, user: str) -> Session:
        """A session for the holder of ``token`` (or, on a cluster without a key, for ``user``);
        RestError when the auth policy refuses."""
        headers = {"authorization": f"Bearer {token}"} if token else {"x-slurm-user-name": user}
        md = metadata_from_headers(headers, resolve_local_user, SOURCE)
        ctx = self.api.adapter.context("GetJobs", md, request.remote_addr or "ui")
        await self.api.adapter.authorize(ctx, SOURCE)
        try:
            ident = getattr(ctx, "identity", None) or identity_from_metadata(ctx.metadata)
        except IdentityError as exc:
            raise RestError(401, -1, str(exc), SOURCE) from None
        now = self.now()
        expires = now + float(self.ctl.auth.settings.token_ttl_secs)
        if token and self.has_key:
            claims = self.ctl.auth.verify(token)
            if isinstance(claims, Exception):
                raise RestError(401, -1, "invalid credential", SOURCE)
            expires = claims.expires_at
        return self.sessions.create(ident.user, md, expires, now, admin=is_admin(ident, self.ctl.state), uid=ident.uid)

    # ------------------------------------------------------------------ rendering

    def render(self, template: str, session: Session | None, code: int = 200, **values: Any) -> Response:
        html = self.env.get_template(template).render(
            session=session, csrf=session.csrf if session else "", cluster_name=self.ctl.cfg.cluster_name,
            flash=session.take_flash() if session else [], page_path=request.full_path.rstrip("?"), **values,
        )  # fmt: skip
        response = Response(html, status=code, content_type="text/html; charset=utf-8")
        self._harden(response)
        return response

    @staticmethod
    def _harden(response: Response) -> None:
        response.headers["Content-Security-Policy"] = (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"

    def view_context(self, session: Session, args: Mapping[str, str]) -> ViewContext:
        now = self.now()
        return ViewContext(self, session, args, self.ctl.cfg.cluster_name, now, self.ring,
                           lambda: self.sampler.sample_now(int(now)))  # fmt: skip

    async def load(self, page: Page, session: Session, args: Mapping[str, str]) -> dict[str, Any]:
        view, params = page
        return dict(await view.load(self.view_context(session, args), **params))

    async def render_live(self, page: Page, session: Session, values: dict[str, Any]) -> str:
        """A page's live part for the event stream, rendered in slices with the controller's other
        tasks run between them (a full Jobs page is thousands of pieces)."""
        template = self.env.get_template(page[0].TEMPLATE)
        ctx = template.new_context({"session": session, "csrf": session.csrf, **values})
        pieces: list[str] = []
        for i, piece in enumerate(template.blocks["live"](ctx)):
            pieces.append(piece)
            if i % _SLICE == _SLICE - 1:
                await trio.sleep(0)
        return "".join(pieces)

    def redirect(self, where: str, cookie: str | None = None) -> Response:
        response = Response("", status=303, headers={"Location": where})
        if cookie is not None:
            response.headers["Set-Cookie"] = cookie
        self._harden(response)
        return response

    # ------------------------------------------------------------------ routes

    def _routes(self) -> None:
        app = self.api.app

        def add(path: str, endpoint: str, fn: Callable[..., Awaitable[Response]], methods: list[str]) -> None:
            app.add_url_rule(path, f"ui_{endpoint}", fn, methods=methods)

        async def root() -> Response:
            return self.redirect("/ui/")

        add("/ui", "root", root, ["GET"])

        async def static(name: str) -> Response:
            data = self.static.get(name)
            if data is None:
                return Response("not found", status=404, content_type="text/plain")
            kind = "text/css" if name.endswith(".css") else "text/javascript"
            response = Response(data, content_type=f"{kind}; charset=utf-8")
            response.headers["Cache-Control"] = "max-age=300"
            response.headers["X-Content-Type-Options"] = "nosniff"
            return response

        add("/ui/static/<name>", "static", static, ["GET"])

        async def login_form() -> Response:
            return self.render("login.html", None, has_key=self.has_key, error="")

        async def login() -> Response:
            form = await request.form
            token, user = form.get("token", "").strip(), form.get("user", "").strip()
            if token.startswith("SLURM_JWT="):
                token = token.split("=", 1)[1]
            if not token and (self.has_key or not user):
                return self.render("login.html", None, 400, has_key=self.has_key, error="Paste a token to sign in.")
            try:
                session = await self.sign_in(token, "" if self.has_key else user)
            except RestError as exc:
                log.info("dashboard sign-in refused: %s", exc)
                return self.render("login.html", None, exc.status if exc.status in (401, 403) else 401,
                                   has_key=self.has_key, error="Sign-in refused: the token is not valid here.")  # fmt: skip
            return self.redirect("/ui/", session_cookie(session, self.now(), secure=self.secure))

        add("/ui/login", "login_form", login_form, ["GET"])
        add("/ui/login", "login", login, ["POST"])

        async def login_link() -> Response:
            token = request.args.get("token", "").strip()
            error = "This sign-in link is not valid."
            if token and self.has_key:
                claims = self.ctl.auth.verify(token)
                if not isinstance(claims, Exception) and claims.token_id:
                    if self.links.use(claims.token_id, claims.expires_at, self.now()):
                        try:
                            session = await self.sign_in(token, "")
                        except RestError:
                            pass
                        else:
                            return self.redirect("/ui/", session_cookie(session, self.now(), secure=self.secure))
                    else:
                        error = "This sign-in link has already been used: run spur web again."
            return self.render("login.html", None, 401, has_key=self.has_key, error=error)

        add("/ui/login/link", "login_link", login_link, ["GET"])

        async def logout() -> Response:
            session = self.current_session()
            form = await request.form
            if session is None or not csrf_ok(session, form.get("csrf")):
                return Response("refused: missing or wrong CSRF token", status=403, content_type="text/plain")
            self.sessions.drop(session.id)
            return self.redirect("/ui/login", clear_cookie(secure=self.secure))

        add("/ui/logout", "logout", logout, ["POST"])

        def page_route(path: str, endpoint: str) -> None:
            async def show(**params: Any) -> Response:
                session = self.current_session()
                if session is None:
                    return self.redirect("/ui/login")
                page = resolve_page(request.path)
                assert page is not None
                return await self._show(page, session)

            add(path, endpoint, show, ["GET"])

        for path, endpoint in (("/ui/", "overview"), ("/ui/jobs", "jobs"), ("/ui/job/<int:job_id>", "job"),
                               ("/ui/nodes", "nodes"), ("/ui/accounting", "accounting"), ("/ui/cluster", "cluster")):  # fmt: skip
            page_route(path, endpoint)

        async def job_action(job_id: int) -> Response:
            return await self._action(lambda s, form: self._job_action(s, job_id, form), f"/ui/job/{job_id}")

        async def node_action(name: str) -> Response:
            return await self._action(lambda s, form: self._node_action(s, name, form), "/ui/nodes")

        add("/ui/job/<int:job_id>/action", "job_action", job_action, ["POST"])
        add("/ui/node/<name>/action", "node_action", node_action, ["POST"])

        async def events() -> Response:
            session = self.current_session()
            if session is None:
                return Response("sign in first", status=401, content_type="text/plain")
            target = urlsplit(request.args.get("page", "/ui/"))
            page = resolve_page(target.path)
            if page is None:
                return Response("no such page", status=404, content_type="text/plain")
            args = dict(parse_qsl(target.query))
            return self._event_stream(page, session, args)

        add("/ui/events", "events", events, ["GET"])

    async def _show(self, page: Page, session: Session) -> Response:
        try:
            values = await self.load(page, session, request.args)
        except FilterError as exc:
            return self.render("error.html", session, 400, status=400, message=str(exc))
        except RestError as exc:
            if exc.status == 401:
                self.sessions.drop(session.id)
                return self.redirect("/ui/login", clear_cookie(secure=self.secure))
            return self.render("error.html", session, exc.status, status=exc.status, message=_message(exc))
        return self.render(page[0].TEMPLATE, session, **values)

    async def _action(self, act: Callable[[Session, Mapping[str, str]], Awaitable[str]], back: str) -> Response:
        session = self.current_session()
        if session is None:
            return Response("sign in first", status=401, content_type="text/plain")
        form = await request.form
        if not csrf_ok(session, form.get("csrf")):
            return self.render("error.html", session, 403, status=403,
                               message="Refused: the form's CSRF token is missing or wrong. Reload the page.")  # fmt: skip
        try:
            done = await act(session, form)
        except (RestError, ValueError) as exc:
            status = exc.status if isinstance(exc, RestError) else 400
            message = _message(exc) if isinstance(exc, RestError) else str(exc)
            return self.render("error.html", session, status, status=status, message=message)
        session.flash.append(done)
        return self.redirect(back)

    async def _job_action(self, session: Session, job_id: int, form: Mapping[str, str]) -> str:
        action = form.get("action", "")
        if action == "cancel":
            resp = await self.call(session, "controller", "CancelJob", pb.CancelJobRequest(job_id=job_id))
            return f"Job {job_id}: cancel requested ({resp.state})."
        if action in ("hold", "release", "requeue"):
            await self.call(session, "controller", "UpdateJob", pb.UpdateJobRequest(job_id=job_id, action=action))
            return f"Job {job_id}: {action} done."
        raise ValueError(f"unknown job action {action[:32]!r}: cancel, hold, release or requeue")

    async def _node_action(self, session: Session, name: str, form: Mapping[str, str]) -> str:
        action = form.get("action", "")
        if action not in _NODE_ACTIONS:
            raise ValueError(f"unknown node action {action[:32]!r}: drain or resume")
        reason = form.get("reason", "").strip()
        if action == "drain" and not reason:
            raise ValueError("a drain needs a reason")
        req = pb.UpdateNodeRequest(nodes=name, state=_NODE_ACTIONS[action], reason=reason)
        await self.call(session, "controller", "UpdateNode", req)
        return f"Node {name}: {action} done."

    # ------------------------------------------------------------------ live updates

    def _event_stream(self, page: Page, session: Session, args: dict[str, str]) -> Response:
        send, receive = trio.open_memory_channel[str](64)
        scope = trio.CancelScope()
        peer = request.remote_addr or "ui"

        async def produce() -> None:
            with scope:
                async with send, trio.open_nursery() as nursery:
                    nursery.start_soon(self._live_loop, page, session, args, send.clone())
                    if page[0] is job:
                        nursery.start_soon(self._output_loop, page[1]["job_id"], session, peer, send.clone())

        self.api.app.add_background_task(produce)

        async def stream() -> Any:
            try:
                yield b"retry: 2000\n\n"
                async for message in receive:
                    yield message.encode()
            finally:
                scope.cancel()
                receive.close()

        response = Response(stream(), content_type="text/event-stream")
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Accel-Buffering"] = "no"
        response.timeout = None
        return response

    async def _live_loop(
        self, page: Page, session: Session, args: dict[str, str], send: trio.MemorySendChannel[str]
    ) -> None:
        async def render() -> str:
            try:
                return await self.render_live(page, session, await self.load(page, session, args))
            except RestError as exc:
                body = {"status": exc.status, "message": _message(exc)}
                raise live.Refused(sse("refused", json.dumps(body)), final=exc.status == 401) from None
            except FilterError as exc:
                raise live.Refused(sse("refused", json.dumps({"status": 400, "message": str(exc)})), final=False) from None

        async with send:
            await live.refresh_loop(render, lambda: self.ctl.change_event().wait, send, lambda html: sse("live", html))

    async def _output_loop(self, job_id: int, session: Session, peer: str, send: trio.MemorySendChannel[str]) -> None:
        """The job's output, for its owner or an administrator (the output WebSocket's check)."""
        from spur.rest.output import _stream

        class _Relay:
            async def send(self, text: str) -> None:
                message = json.loads(text)
                await send.send(sse(message.get("type", "output"), text))

        async with send:
            try:
                resp = await self.api.adapter.call(
                    "GetJobs", pb.GetJobsRequest(job_ids=[job_id], include_finished=True), session.metadata, peer, SOURCE
                )
                found = [j for j in resp.jobs if j.job_id == job_id]
                if len(found) != 1 or len(resp.jobs) != 1:
                    return  # an array job: the page lists its tasks, each with its own output
                if not (session.admin or session.uid == found[0].uid):
                    return
                await _stream(self.api, job_id, session.metadata, peer, {"stdout": 0, "stderr": 0}, _Relay())
            except RestError as exc:
                await send.send(sse("refused", json.dumps({"status": exc.status, "message": _message(exc)})))


def _message(exc: RestError) -> str:
    return str(exc.description or exc)


__all__ = ["Dashboard", "MAX_FORM_BYTES", "resolve_page", "sse"]


