"""The ``/slurm/v0.0.4x`` and ``/slurmdb/v0.0.4x`` views: the same service calls as v0.0.38's views,
answered through :mod:`spur.rest.v004x` and shaped by each version's document. Only operations the
version's document declares are registered (so ``job/allocate`` exists from v0.0.41 on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import request

from spur.rest import mapping, slurmdb, v004x
from spur.rest.auth import home_of
from spur.rest.errors import (
    ESLURM_INVALID_NODE_NAME,
    ESLURM_NOT_SUPPORTED,
    ESLURM_REST_EMPTY_RESULT,
    ESLURM_REST_INVALID_QUERY,
    RestError,
)
from spur.rest.jobcache import RenderedJobs
from spur.rpc.proto import spur_pb2 as pb

if TYPE_CHECKING:
    from spur.rest.app import RestApi

Body = dict[str, Any] | tuple[dict[str, Any], int]


def register_all(api: RestApi) -> None:
    """Every v0.0.4x version's views on ``api`` (spurctld calls it once the v0.0.38 views exist)."""
    from spur.rest.openapi import VERSIONS

    for version in VERSIONS[1:]:
        register(api, version)


def register(api: RestApi, version: str) -> None:  # noqa: C901 - one place that lists every route
    d = v004x.Dialect(version)
    layout = d.job_resources_layout()
    S, D = f"/slurm/{version}", f"/slurmdb/{version}"

    def route(path: str, method: str, db: bool = False, empty: str | None = None, shape: bool = True) -> Any:
        def decorate(view: Any) -> Any:
            if not d.has(path, method) or (path, method) in api.registered:
                return view  # not in this version, or served by the accounting backend's route
            return api.route(path, method, db=db, empty=empty, dialect=d, shape=shape)(view)

        return decorate

    def ok(db: bool = False, warnings: list[dict] | None = None, **fields: Any) -> dict[str, Any]:
        return api.v4_body(d, db, warnings=warnings, **fields)

    rendered = RenderedJobs(d.job_renderer(layout))
    api.job_caches[version] = rendered

    async def job_lists(jobs: list[pb.JobInfo] | None = None, frames: list[bytes] | None = None) -> dict[str, Any]:
        """The ``jobs`` answer of the listed ``jobs``, or of the framed encodings of a complete listing."""
        now = int(api.ctl.clock.wall())
        cluster = api.cluster
        if frames is not None:
            listed = frames
            infos = await api.render_jobs(lambda: rendered.render_frames(listed, cluster, True), len(listed), version)
        else:
            found = jobs or []
            infos = await api.render_jobs(lambda: rendered.fragments(found, cluster), len(found))
        return ok(jobs=infos, last_backfill=now, last_update=now)

    # ------------------------------------------------------------------ slurm
    @route(f"{S}/ping/", "get", empty="pings")
    async def ping() -> Body:
        resp = await api.call("GetControllers", pb.Empty(), "_op_handler_ping")
        return ok(pings=v004x.pings(resp.controllers))

    @route(f"{S}/diag/", "get")
    async def diag() -> Body:
        source = "_op_handler_diag"
        md = api.identity_metadata(source)
        resp = await api.call("GetJobs", pb.GetJobsRequest(include_finished=True), source, md)
        stats = mapping.diag_statistics(resp.jobs, api.ctl.clock.wall(), api.started_at, api.counters())
        return ok(statistics=v004x.diag(stats))

    @route(f"{S}/licenses/", "get", empty="licenses")
    async def licenses() -> Body:
        api.identity_metadata("_op_handler_licenses")
        # Spur has no licenses: 24.11 warns so when it has none to list
        none = [{"description": "Zero licenses to dump", "source": ""}]
        return ok(licenses=[], last_update=int(api.ctl.clock.wall()), warnings=none)

    @route(f"{S}/shares", "get")
    async def shares() -> Body:
        api.identity_metadata("_op_handler_shares")
        return ok(shares={"shares": [], "total_shares": 0})

    @route(f"{S}/reconfigure/", "get")
    async def reconfigure() -> Body:
        await api.call("Reconfigure", pb.Empty(), "_op_handler_reconfigure")
        return ok()

    @route(f"{S}/jobs/", "get", empty="jobs")
    async def jobs() -> Body:
        return await job_lists(frames=await api.job_frames(pb.GetJobsRequest(), "_op_handler_jobs"))

    # Sent as built (not shaped): the documents declare job_info items here, which would drop the
    # ``state`` that 24.11 sends in each entry (see v004x.job_state_entry)
    @route(f"{S}/jobs/state/", "get", empty="jobs", shape=False)
    async def jobs_state() -> Body:
        source = "_op_handler_job_states"
        md = api.identity_metadata(source)
        wanted = [int(x) for x in (request.args.get("job_id") or "").split(",") if x.strip().isdigit()]
        resp = await api.call("GetJobs", pb.GetJobsRequest(job_ids=wanted, include_finished=True), source, md)
        now = {"set": True, "infinite": False, "number": int(api.ctl.clock.wall())}
        return ok(jobs=[v004x.job_state_entry(j) for j in resp.jobs], last_backfill=now, last_update=now)

    @route(f"{S}/jobs/", "delete")
    async def kill_jobs() -> Body:
        source = "_op_handler_kill_jobs"
        md = api.identity_metadata(source)
        body = await api.json_body(source)
        ids = body.get("jobs")
        if not isinstance(ids, list) or not ids:
            raise RestError(400, ESLURM_REST_INVALID_QUERY, "jobs must list the job ids to signal", source)
        sig = mapping.parse_signal(str(body["signal"]) if body.get("signal") is not None else None, source)
        errors = []
        for text in ids:
            jid, task = mapping.parse_job_id(str(text), source)
            req = pb.CancelJobRequest(job_id=jid, signal=0 if sig == 9 else sig)
            if task is not None:
                req.array_task_id = task
            try:
                await api.call("CancelJob", req, source, md)
            except RestError as exc:
                errors.append(exc.entry())
        # Refusals are listed in errors[]: status[] entries' schema requires slash-named keys
        # ("error/code") no client can parse.
        return api.v4_body(d, False, errors=errors, status=[])

    @route(f"{S}/job/{{job_id}}", "get", empty="jobs")
    async def get_job(job_id: str) -> Body:
        return await job_lists(await api._find_jobs(job_id, "_handle_job_get"))

    @route(f"{S}/job/{{job_id}}", "post")
    async def update_job(job_id: str) -> Body:
        source = "_op_handler_job_post"
        md = api.identity_metadata(source)
        jid, task = mapping.parse_job_id(job_id, source)
        desc = v004x.update_body(await api.json_body(source), source)
        await api.call("UpdateJob", mapping.update_to_request(jid, task, desc, source), source, md)
        return ok(results=[{"job_id": jid, "step_id": "", "error": "No error", "error_code": 0,
                            "why": "", "sibling": ""}], job_id=str(jid), step_id="", job_submit_user_msg="")  # fmt: skip

    @route(f"{S}/job/{{job_id}}", "delete")
    async def cancel_job(job_id: str) -> Body:
        source = "_op_handler_job_delete"
        md = api.identity_metadata(source)
        req = mapping.cancel_request(job_id, request.args.get("signal"), request.args.get("flags"), source)
        # An unknown job is a 404 with 2017 (24.11 answers 200 and a status[] entry whose required
        # keys its own document names "error/code", which no generated client could parse).
        await api.call("CancelJob", req, source, md)
        return ok(status=[])

    async def submit_spec(spec: pb.JobSpec, source: str, md: dict[str, str]) -> Body:
        resp = await api.call("SubmitJob", pb.SubmitJobRequest(spec=spec), source, md)
        warnings = []
        if spec.hold:
            text = "Job is in held state, pending scheduler release"
            warnings.append({"description": text, "source": source})
        result = {"job_id": resp.job_id, "step_id": "batch", "error_code": 0, "error": "No error",
                  "job_submit_user_msg": ""}  # fmt: skip
        return ok(warnings=warnings, result=result, job_id=resp.job_id, step_id="batch", job_submit_user_msg="")

    @route(f"{S}/job/submit", "post")
    async def submit() -> Body:
        source = "_job_post"
        md = api.identity_metadata(source)
        spec = v004x.submit_body_to_spec(await api.json_body(source), home_of(md["x-spur-user"]), source)
        return await submit_spec(spec, source, md)

    @route(f"{S}/job/allocate", "post")
    async def allocate() -> Body:
        source = "_job_post_allocate"
        md = api.identity_metadata(source)
        body = await api.json_body(source)
        job = body.get("job") or {}
        desc = v004x.job_desc_to_v0038(job, "job", source)
        desc.setdefault("environment", {})
        spec = mapping.submit_to_spec({"job": desc}, home_of(md["x-spur-user"]), source, allocation=True)
        resp = await api.call("SubmitJob", pb.SubmitJobRequest(spec=spec), source, md)
        return ok(job_id=resp.job_id, job_submit_user_msg="")

    @route(f"{S}/nodes/", "get", empty="nodes")
    async def nodes() -> Body:
        resp = await api.call("GetNodes", pb.GetNodesRequest(), "_op_handler_nodes")
        now = int(api.ctl.clock.wall())
        return ok(nodes=[v004x.node(n, api.cluster) for n in resp.nodes], last_update=now)

    @route(f"{S}/node/{{node_name}}", "get", empty="nodes")
    async def node(node_name: str) -> Body:
        source = "_op_handler_node"
        md = api.identity_metadata(source)
        if not node_name or any(ch in node_name for ch in "[],"):
            raise RestError(404, ESLURM_INVALID_NODE_NAME, f"Unable to find node {node_name}", source)
        resp = await api.call("GetNodes", pb.GetNodesRequest(names=[node_name]), source, md)
        now = int(api.ctl.clock.wall())
        return ok(nodes=[v004x.node(n, api.cluster) for n in resp.nodes], last_update=now)

    @route(f"{S}/node/{{node_name}}", "post")
    async def update_node(node_name: str) -> Body:
        source = "_op_handler_node_post"
        md = api.identity_metadata(source)
        body = await api.json_body(source)
        states = body.get("state") or []
        if isinstance(states, str):
            states = [states]
        if not isinstance(states, list) or len(states) != 1 or not isinstance(states[0], str):
            raise RestError(400, ESLURM_REST_INVALID_QUERY, "state: one of DRAIN, RESUME, DOWN, UNDRAIN", source)
        reason = body.get("reason") or ""
        if not isinstance(reason, str):
            raise RestError(400, ESLURM_REST_INVALID_QUERY, "reason: expected a string", source)
        req = pb.UpdateNodeRequest(nodes=node_name, state=states[0].upper(), reason=reason)
        await api.call("UpdateNode", req, source, md)
        return ok()

    async def not_supported(what: str, source: str) -> Body:
        api.identity_metadata(source)
        raise RestError(400, ESLURM_NOT_SUPPORTED, f"{what} is not supported by Spur", source)

    @route(f"{S}/node/{{node_name}}", "delete")
    async def delete_node(node_name: str) -> Body:
        return await not_supported("deleting a node", "_op_handler_node_delete")

    @route(f"{S}/nodes/", "post")
    async def update_nodes() -> Body:
        return await not_supported("updating nodes in bulk", "_op_handler_nodes_post")

    @route(f"{S}/partitions/", "get", empty="partitions")
    async def partitions() -> Body:
        return ok(partitions=await partition_list([], "_op_handler_partitions"), last_update=0)

    @route(f"{S}/partition/{{partition_name}}", "get", empty="partitions")
    async def one_partition(partition_name: str) -> Body:
        return ok(partitions=await partition_list([partition_name], "_op_handler_partition"), last_update=0)

    async def partition_list(names: list[str], source: str) -> list[dict[str, Any]]:
        md = api.identity_metadata(source)
        parts = await api.call("GetPartitions", pb.GetPartitionsRequest(names=names), source, md)
        all_nodes = await api.call("GetNodes", pb.GetNodesRequest(), source, md)
        cpus = {n.name: n.cpus for n in all_nodes.nodes}
        memory = {n.name: n.memory_mb for n in all_nodes.nodes}
        return [v004x.partition(p, cpus, api.cluster, memory) for p in parts.partitions]

    @route(f"{S}/reservations/", "get", empty="reservations")
    async def reservations() -> Body:
        api.identity_metadata("_op_handler_reservations")
        return ok(reservations=[], last_update=0)

    @route(f"{S}/reservation/{{reservation_name}}", "get", empty="reservations")
    async def reservation(reservation_name: str) -> Body:
        source = "_op_handler_reservation"
        api.identity_metadata(source)
        raise RestError(404, ESLURM_REST_EMPTY_RESULT, f"Unable to find reservation {reservation_name}", source)

    # ------------------------------------------------------------------ slurmdb
    _entity_routes(api, d, D, ok)

    backend = getattr(api.ctl, "accounting_backend", None)
    if backend is not None and all(hasattr(backend, m) for m in ("add_accounts", "add_users", "add_associations")):

        async def add_with_associations(who: str, source: str) -> list[str]:
            md = api.identity_metadata(source)
            body = v004x.plain_numbers(await api.json_body(source))
            names, accounts, clusters, own = v004x.add_condition(body, who, source)
            clusters = clusters or [api.cluster]
            entities: list[slurmdb.AccountRecord] | list[slurmdb.UserRecord]
            later: list[dict[str, Any]] = []
            if who == "accounts":
                entities = slurmdb.accounts_from_body({"accounts": [dict(own, name=n) for n in names]}, source)
                assocs = [{"account": n, "cluster": c} for n in names for c in clusters]
                add = backend.add_accounts
            else:
                # A new user's default account is the one named, else the first; an existing user
                # keeps theirs unless one is named, set once the associations exist (as 24.11).
                default = own.get("default")
                named = own.get("default_account") or (default.get("account") if isinstance(default, dict) else None)
                existing = {u.name for u in await api._backend_call(backend.list_users, md, source)}
                users = [{"name": n, "default": {"account": named or accounts[0]}} for n in names if n not in existing]
                entities = slurmdb.users_from_body({"users": users}, source)
                later = [{"name": n, "default": {"account": named}} for n in names if n in existing and named]
                assocs = [{"account": a, "cluster": c, "user": n} for n in names for a in accounts for c in clusters]
                add = backend.add_users
            records = slurmdb.associations_from_body({"associations": assocs}, source)
            if entities:
                await api._backend_call(add, md, source, entities)
            await api._backend_call(backend.add_associations, md, source, records)
            if who == "users" and later:
                await api._backend_call(add, md, source, slurmdb.users_from_body({"users": later}, source))
            return names

        @route(f"{D}/accounts_association/", "post", db=True)
        async def accounts_association() -> Body:
            names = await add_with_associations("accounts", "op_handler_accounts_association")
            return ok(True, added_accounts=",".join(names))

        @route(f"{D}/users_association/", "post", db=True)
        async def users_association() -> Body:
            names = await add_with_associations("users", "op_handler_users_association")
            return ok(True, added_users=",".join(names))

    @route(f"{D}/jobs/", "get", db=True, empty="jobs")
    async def db_jobs() -> Body:
        source = "op_handler_jobs"
        resp = await api.call("GetJobs", pb.GetJobsRequest(include_finished=True), source)
        keep = mapping.slurmdb_job_filter(request.args)
        now, cluster = api.ctl.clock.wall(), api.cluster
        return ok(True, jobs=[v004x.db_job(j, cluster, now) for j in resp.jobs if keep(j)])

    @route(f"{D}/job/{{job_id}}", "get", db=True, empty="jobs")
    async def db_job(job_id: str) -> Body:
        found = await api._find_jobs(job_id, "op_handler_job", db=True)
        now = api.ctl.clock.wall()
        return ok(True, jobs=[v004x.db_job(j, api.cluster, now) for j in found])

    @route(f"{D}/diag/", "get", db=True)
    async def db_diag() -> Body:
        api.identity_metadata("op_handler_diag")
        rpcs = [
            {"rpc": name, "count": count, "time": {"average": avg_us, "total": total_us}}
            for name, count, avg_us, total_us in api.rpc_stats()
        ]
        # no rollups: 24.11's documents require slash-named keys ("hourly/count") there
        return ok(True, statistics={"time_start": int(api.started_at), "RPCs": rpcs, "users": []})

    @route(f"{D}/ping/", "get", db=True)
    async def db_ping() -> Body:
        api.identity_metadata("op_handler_ping")
        return ok(True, pings=[{"hostname": "spurctld", "responding": True, "latency": 0, "primary": True}])

    @route(f"{D}/instances/", "get", db=True, empty="instances")
    async def instances() -> Body:
        api.identity_metadata("op_handler_instances")
        return ok(True, instances=[])

    @route(f"{D}/instance/", "get", db=True, empty="instances")
    async def instance() -> Body:
        api.identity_metadata("op_handler_instance")
        return ok(True, instances=[])

    @route(f"{D}/tres/", "get", db=True, empty="TRES")
    async def tres() -> Body:
        api.identity_metadata("op_handler_tres")
        return ok(True, TRES=[dict(t) for t in mapping.STANDARD_TRES])

    @route(f"{D}/config", "get", db=True)
    async def db_config() -> Body:
        source = "op_handler_config"
        out = await api.config_entities(source)
        clusters: list[dict[str, Any]] = []
        list_clusters = getattr(getattr(api.ctl, "accounting_backend", None), "list_clusters", None)
        if list_clusters is not None:
            records = await api._backend_call(list_clusters, api.identity_metadata(source), source)
            clusters = [slurmdb.cluster_to_json(r) for r in records]
        # slurmdbd 24.11 lists the users' associations here, not the accounts'
        users = {"with_assocs": "true"}
        nodes = (await api.call("GetNodes", pb.GetNodesRequest(), source)).nodes if clusters else None
        return ok(True, clusters=v004x.entities("clusters", clusters, {}, version, nodes), tres=out["tres"],
                  accounts=v004x.entities("accounts", out["accounts"], {}),
                  users=v004x.entities("users", out["users"], users), qos=v004x.entities("qos", out["qos"], {}),
                  wckeys=out["wckeys"], associations=v004x.entities("associations", out["associations"], {}, version),
                  instances=[])  # fmt: skip


def _entity_routes(api: RestApi, d: v004x.Dialect, base: str, ok: Any) -> None:
    """The accounting entities, through the same backend calls as v0.0.38's (see spur.rest.slurmdb):
    each v0.0.38 entity route maps to the version's path (24.11 adds a trailing ``/`` to list paths
    and names some path parameters differently)."""
    backend = getattr(api.ctl, "accounting_backend", None)
    if backend is None:
        return
    for entity in slurmdb.ENTITY_ROUTES:
        fn = getattr(backend, entity.backend_method, None)
        if fn is None:
            continue
        path = _entity_path(d, base, entity)
        if path is None:
            continue
        key = entity.key
        if key:  # the version's spelling of the list field (v0.0.38 "tres" is 24.11's "TRES")
            fields = {f.lower(): f for f in d.response_fields(path, entity.method)}
            key = fields.get(key.lower(), key)
        api.entity_route(entity, fn, path=path, dialect=d, ok=ok, key=key)


def _entity_path(d: v004x.Dialect, base: str, entity: slurmdb.EntityRoute) -> str | None:
    tail = entity.path.split("/v0.0.38", 1)[1]  # e.g. /accounts or /account/{account_name}
    head, _, _param = tail.lstrip("/").partition("/")
    for candidate in d.doc["paths"]:
        if not candidate.startswith(base + "/"):
            continue
        rest = candidate[len(base) + 1 :].rstrip("/")
        c_head, _, c_param = rest.partition("/")
        if c_head == head and bool(c_param) == bool(_param) and entity.method in d.doc["paths"][candidate]:
            return candidate
    return None
