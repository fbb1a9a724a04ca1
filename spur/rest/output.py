"""``GET /spur/v1/job/{job_id}/output`` (WebSocket): a job's stdout/stderr as it is written.

Protocol (server -> client, JSON text messages; the client sends nothing):

- ``{"type": "output", "stream": "stdout"|"stderr", "task": N, "offset": B, "data": "..."}``:
  bytes ``[B, B+len)`` of that stream (UTF-8, undecodable bytes replaced), in the order written;
- ``{"type": "end", "job_id": N, "state": "COMPLETED", "exit_code": 0, "signal": 0}``: the job
  ended (or had already ended); the server then closes the connection (code 1000).

Query parameters: ``offset`` (skip the first N bytes of stdout) and ``stderr_offset``: resume
where an earlier attachment stopped. Authentication is the REST API's (X-SLURM-USER-NAME +
X-SLURM-USER-TOKEN, or Authorization: Bearer), checked by the controller's auth interceptor; only
the job's owner or an administrator may attach. A refusal is an HTTP answer before the upgrade
(401, 403, 404 with Slurm's ``errors[]`` body). The data comes from the job's node agent over its
StreamOutput RPC (the same stream srun reads), waiting for the job to start if it is pending.
"""

from __future__ import annotations

import codecs
import contextlib
import json
from typing import TYPE_CHECKING, Any, Protocol

import trio

from spur.auth.identity import IdentityError, identity_from_metadata
from spur.rest import mapping
from spur.rest.auth import metadata_from_headers, resolve_local_user
from spur.rest.errors import (
    ESLURM_ACCESS_DENIED,
    ESLURM_INVALID_JOB_ID,
    ESLURM_REST_INVALID_QUERY,
    SLURM_PROTOCOL_AUTHENTICATION_ERROR,
    RestError,
    body,
    from_rpc_error,
)
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from quart_trio import QuartTrio

    from spur.rest.adapter import ServiceAdapter


class RestApi(Protocol):
    """What the output route needs of ``spur.rest.app.RestApi``, which registers it."""

    @property
    def app(self) -> QuartTrio: ...

    @property
    def adapter(self) -> ServiceAdapter: ...

ROUTE = "/spur/v1/job/<job_id>/output"
SOURCE = "spur_job_output"
_LAUNCH_WAIT_SECS = 30.0


def _offset(args: Any, name: str) -> int:
    text = args.get(name)
    if text is None or text == "":
        return 0
    if not text.isdigit() or len(text) > 18:
        raise RestError(400, ESLURM_REST_INVALID_QUERY, f"{name} must be a byte count", SOURCE)
    return int(text)


class _Stream:
    """Per-stream byte position, resume offset and incremental UTF-8 decoding."""

    def __init__(self, skip: int) -> None:
        self.position = 0
        self.skip = skip
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> tuple[int, str] | None:
        start = self.position
        self.position += len(data)
        if self.position <= self.skip:
            return None
        if start < self.skip:
            data = data[self.skip - start :]
            start = self.skip
        text = self.decoder.decode(data)
        return (start, text) if text else None


def register_output_route(api: RestApi) -> None:
    from quart import Response, websocket

    async def job_output(job_id: str) -> Any:
        try:
            md = metadata_from_headers(websocket.headers, resolve_local_user, SOURCE)
            jid, task = mapping.parse_job_id(job_id, SOURCE)
            skips = {"stdout": _offset(websocket.args, "offset"), "stderr": _offset(websocket.args, "stderr_offset")}
            peer = websocket.remote_addr or "rest"
            ctx = api.adapter.context("GetJobs", md, peer)
            await api.adapter.authorize(ctx, SOURCE)
            try:  # the verified identity when the auth interceptor set one, else the claimed one
                ident = getattr(ctx, "identity", None) or identity_from_metadata(ctx.metadata)
            except IdentityError as exc:
                raise RestError(401, SLURM_PROTOCOL_AUTHENTICATION_ERROR, str(exc), SOURCE) from None
            resp = await api.adapter.call(
                "GetJobs", pb.GetJobsRequest(job_ids=[jid], include_finished=True), ctx.metadata, peer, SOURCE
            )
            jobs = [j for j in resp.jobs if task is None or (j.HasField("array_task_id") and j.array_task_id == task)]
            if len(jobs) != 1:
                what = "an array job: attach to one task (JOBID_TASK)" if jobs else f"Unable to find JobId={job_id}"
                raise RestError(404, ESLURM_INVALID_JOB_ID, what, SOURCE)
            job = jobs[0]
            if not getattr(ident, "is_admin", False) and ident.uid != job.uid:
                raise RestError(
                    403, ESLURM_ACCESS_DENIED, "only the job's owner or an administrator may attach", SOURCE
                )
        except RestError as exc:
            return Response(
                json.dumps(body(False, [exc.entry()])), status=exc.status, content_type="application/json"
            )
        await websocket.accept()
        try:
            await _stream(api, job.job_id, ctx.metadata, peer, skips, websocket)
        except RestError as exc:
            await websocket.send(json.dumps({"type": "error", "errors": [exc.entry()]}))
        await websocket.close(1000)
        return None

    api.app.add_websocket(ROUTE, "job_output", job_output)


async def _stream(api: RestApi, job_id: int, md: dict, peer: str, skips: dict[str, int], ws: Any) -> None:
    from spur.rpc.channel import open_channel
    from spur.rpc.stub import agent_stub

    service = api.adapter.service
    try:
        job = await _wait_started(api, job_id, md, peer)
    except RpcError as exc:
        raise from_rpc_error(exc, SOURCE) from None
    if job.state == "RUNNING" and job.allocation:
        nodes = await api.adapter.call(
            "GetNodes", pb.GetNodesRequest(names=[job.allocation[0].node]), md, peer, SOURCE
        )
        node = nodes.nodes[0]
        streams = {name: _Stream(skip) for name, skip in skips.items()}
        deadline = trio.current_time() + _LAUNCH_WAIT_SECS
        delay = 0.05
        while True:
            try:
                # The controller has checked the caller may attach; it reads from spurd as itself
                # (its daemon credential: [auth] required mode refuses a call without one).
                async with open_channel(
                    f"{node.address}:{node.port}",
                    metadata_provider=service.ctl.auth.daemon_metadata,
                    tls=service.ctl.client_tls,
                ) as channel:
                    request = pb.StreamOutputRequest(job_id=job_id, follow=True, observer=True)
                    async for chunk in agent_stub(channel).StreamOutput(request):
                        if chunk.stream == "exit":
                            continue
                        stream = streams.get(chunk.stream)
                        piece = stream.feed(chunk.data) if stream is not None else None
                        if piece is not None:
                            message = {"type": "output", "stream": chunk.stream, "task": chunk.task,
                                       "offset": piece[0], "data": piece[1]}  # fmt: skip
                            await ws.send(json.dumps(message))
                break
            except RpcError as exc:
                if exc.code is StatusCode.NOT_FOUND and trio.current_time() < deadline:
                    current = service.ctl.state.jobs.get(job_id)
                    if current is not None and current.state.is_terminal:
                        break  # the agent already forgot it: nothing more to stream
                    await trio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                raise RestError(502, -1, f"lost the output stream from {node.name}: {exc.message}", SOURCE) from None
    final = await _wait_terminal(api, job_id)
    await ws.send(
        json.dumps(
            {"type": "end", "job_id": job_id, "state": final.state, "exit_code": final.exit_code, "signal": final.signal}
        )
    )


async def _wait_started(api: RestApi, job_id: int, md: dict, peer: str) -> pb.JobInfo:
    """The job once it runs (with its allocation) or has ended, via the service's WatchJob."""
    ctx = api.adapter.context("WatchJob", md, peer)
    ctx.deadline = None
    watch = api.adapter.service.WatchJob(pb.GetJobsRequest(job_ids=[job_id]), ctx)
    last: pb.JobInfo | None = None
    async with contextlib.aclosing(watch) as updates:
        async for info in updates:
            last = info
            if (info.state == "RUNNING" and info.allocation) or info.state in mapping.TERMINAL_STATES:
                break
    assert last is not None
    return last


async def _wait_terminal(api: RestApi, job_id: int) -> pb.JobInfo:
    """The job's record once terminal (the agent's stream ended; the report may lag a moment)."""
    from spur.rpc.convert import job_to_proto

    ctl = api.adapter.service.ctl
    with trio.move_on_after(10):
        while True:
            job = ctl.state.jobs.get(job_id)
            if job is None or job.state.is_terminal:
                break
            await ctl.wait_change()
    job = ctl.state.jobs.get(job_id)
    if job is None:
        return pb.JobInfo(job_id=job_id, state="UNKNOWN")
    return job_to_proto(job, include_script=False)
