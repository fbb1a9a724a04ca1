"""The Controller gRPC service: client and agent calls, turned into reads and proposals."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import trio

from spur.auth.admin import is_admin, permission_denied
from spur.auth.callers import caller as _caller
from spur.auth.callers import require_admin as _require_admin
from spur.auth.identity import Identity
from spur.controller.admission import check_node_credential
from spur.controller.intake import array_size
from spur.controller.slicing import map_in_slices
from spur.core.job import Job, JobSpec, JobState
from spur.core.mpi import check_mpi_type
from spur.rpc import convert
from spur.rpc.jobinfo_cache import JobInfoCache
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.trace import span, span_at, spans_on

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.state.immediate import Decision

log = logging.getLogger("spur.controller")

# Slurm's MinJobAge: finished jobs stay visible to squeue for this long.
MIN_JOB_AGE_SECS = 300.0
# The names GetJobs accepts for the PENDING state.
_PENDING_NAMES = frozenset({JobState.PENDING.value, JobState.PENDING.short})
# Metadata header asking for a read of this controller's own (possibly stale) state, not the leader's.
LOCAL_READ_KEY = "x-spur-local-read"


def leader_only(method):
    """Serve on the leader; on a follower, forward the call (with the caller's metadata) to it.

    Writes must be proposed by the leader, and reads are linearizable only there (ReadIndex).
    """

    @functools.wraps(method)
    async def serve(self: ControllerService, request, context: CallContext):
        if self.ctl.is_leader:
            await self.ctl.leader_ready()
            return await method(self, request, context)
        return await self.forward(method.__name__, request, context)

    return serve


class ControllerService:
    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl
        self.job_infos = JobInfoCache()  # encoded JobInfo per job: GetJobs converts only changed jobs

    async def forward(self, method: str, request, context: CallContext):
        stub = await self.ctl.leader_stub()
        remaining = context.time_remaining() if context.deadline is not None else None
        return await getattr(stub, method)(
            request, timeout=remaining or 30.0, metadata=dict(context.metadata)
        )

    # ------------------------------------------------------------------ jobs

    @leader_only
    async def SubmitJob(self, request: pb.SubmitJobRequest, context: CallContext) -> pb.SubmitJobResponse:
        ident = _caller(context)
        began = time.time()
        with self._admit(request.spec.array):  # before the spec is built: a refusal should cost little
            spec = convert.spec_from_proto(request.spec)
            command, decision = self._submission(spec, ident)
            with self.ctl.immediate.flying(decision):
                job_id = await self.ctl.propose(command)
        self.ctl.kick_scheduler()
        if spans_on():
            span_at(job_id, "ctl.submit-received", began)
            span(job_id, "ctl.submit-committed")
        return pb.SubmitJobResponse(job_id=job_id)

    async def submit_many(self, specs: list[JobSpec], ident: Identity) -> list[int | RpcError]:
        """Submit ``specs`` for ``ident`` (leader only; the caller checked) as SubmitJob would each, in
        their order: admitted by the same gate (an item past ``max_submit_queue`` in flight or
        ``MaxJobCount`` is refused RESOURCE_EXHAUSTED on its own), decided for the immediate grant with
        the earlier items in flight, and proposed together so that they share Raft entries and the
        accepted ones get increasing ids in request order. Returns each item's job id or error."""
        outcomes: list[int | RpcError] = []
        proposed: list[int] = []  # positions in outcomes of the commands proposed
        commands: list[c.SubmitJob] = []
        with contextlib.ExitStack() as held:
            for spec in specs:
                try:
                    held.enter_context(self._admit(spec.array, queued=len(commands)))
                except RpcError as exc:
                    outcomes.append(exc)
                    continue
                command, decision = self._submission(spec, ident)
                held.enter_context(self.ctl.immediate.flying(decision))
                proposed.append(len(outcomes))
                outcomes.append(RpcError(StatusCode.INTERNAL, "not proposed"))  # replaced below
                commands.append(command)
            results = await self.ctl.propose_many(commands) if commands else []
        for position, result in zip(proposed, results, strict=True):
            outcomes[position] = result
        if commands:
            self.ctl.kick_scheduler()
        return outcomes

    def _admit(self, array: str, queued: int = 0) -> contextlib.AbstractContextManager[None]:
        """``with`` around the proposal of one submission (an array expression counts its tasks), with
        ``queued`` jobs admitted ahead of it in the same call: RESOURCE_EXHAUSTED at once when the gate
        is full, and the client backs off."""
        limits = self.ctl.cfg.controller
        return self.ctl.submit_gate.admit(
            self.ctl.state.live_job_count() + queued,
            array_size(array),
            max_in_flight=limits.max_submit_queue,
            max_job_count=limits.max_job_count,
        )

    def _submission(self, spec: JobSpec, ident: Identity) -> tuple[c.SubmitJob, Decision]:
        """The SubmitJob command for ``spec`` by ``ident`` now, with slurmctld's quick path decided: a
        job that can run now starts in its submit entry (see spur.state.immediate); everything else
        waits for the scheduler pass. The decision is to be held in flight around the proposal."""
        now = self.ctl.clock.wall()
        decision = self.ctl.immediate.decide(spec, ident.user, now)
        command = c.SubmitJob(
            spec,
            ident.user,
            ident.uid,
            ident.gid,
            ident.group,
            now,
            grant=list(decision.allocation),
            term=self.ctl.raft.term,
        )
        return command, decision

    def _select_jobs(self, request: pb.GetJobsRequest) -> list[Job]:
        state = self.ctl.state
        wanted = {s.upper() for s in request.states}
        if request.job_ids:
            seen: dict[int, Job] = {}
            for i in request.job_ids:
                for job in state.resolve_targets(i):
                    seen[job.job_id] = job
            jobs = list(seen.values())
        elif wanted and wanted <= _PENDING_NAMES:
            # Pending jobs only (`squeue -t PD`, monitoring): from the scheduler's index of pending
            # jobs, not a scan of every job the controller holds (history included).
            jobs = [state.jobs[i] for i in state.sched_index.pending_ids(state)]
        else:
            cutoff = self.ctl.clock.wall() - MIN_JOB_AGE_SECS
            jobs = [
                j
                for j in state.jobs.values()
                if request.include_finished or not j.state.is_terminal or j.end_time >= cutoff
            ]
        if wanted:
            jobs = [j for j in jobs if j.state.value in wanted or j.state.short in wanted]
        if request.users:
            users = set(request.users)
            jobs = [j for j in jobs if j.user in users or str(j.uid) in users]
        if request.partitions:
            parts = set(request.partitions)
            jobs = [j for j in jobs if j.partition in parts]
        return jobs

    async def GetJobs(self, request: pb.GetJobsRequest, context: CallContext) -> pb.GetJobsResponse:
        """Linearizable on the leader (ReadIndex); followers forward. With the ``x-spur-local-read: 1``
        header any controller answers from its own applied state instead (possibly stale; for
        diagnostics and the HA tests that compare every member's state)."""
        if context.metadata.get(LOCAL_READ_KEY) != "1":
            if not self.ctl.is_leader:
                return await self.forward("GetJobs", request, context)
            await self.ctl.leader_ready()
            await self.ctl.read_barrier()
        jobs = self._select_jobs(request)
        frames = await map_in_slices(jobs, self.job_infos.framed)
        return self.job_infos.response_of(frames, self.ctl.state.jobs)

    def leadership(self) -> int | None:
        """This controller's leadership now: its Raft term while it leads, else None (REST's
        prerender keeps the versions listed during one leadership)."""
        return self.ctl.raft.term if self.ctl.is_leader else None

    def listed_jobs(self) -> list[Job] | None:
        """The jobs a complete ``GetJobs`` lists here now (REST's prerender frames them with
        ``job_infos.framed``); None where GetJobs would forward to the leader. No read barrier: a
        stale listing only renders some jobs ahead of time. Prunes ``job_infos`` as a listing does."""
        if not self.ctl.is_leader:
            return None
        self.job_infos.prune(self.ctl.state.jobs)
        return self._select_jobs(pb.GetJobsRequest())

    async def read_jobs(self, request: pb.GetJobsRequest, context: CallContext) -> list | None:
        """For an in-process reader (the dashboard): the jobs ``GetJobs(request)`` would list, as the
        state's own ``Job`` objects (read-only: never mutate them), after the same read barrier; None
        where GetJobs would forward to the leader (ask GetJobs then). No authorization: the caller
        authorizes ``GetJobs`` first."""
        if context.metadata.get(LOCAL_READ_KEY) != "1":
            if not self.ctl.is_leader:
                return None
            await self.ctl.leader_ready()
            await self.ctl.read_barrier()
        return self._select_jobs(request)

    async def read_job_frames(self, request: pb.GetJobsRequest, context: CallContext) -> list[bytes] | None:
        """For an in-process reader (REST's job lists): each job ``GetJobs(request)`` would list, as
        its ``jobs`` field of a ``GetJobsResponse`` (tag, length, encoded ``JobInfo``: the bytes the
        GetJobs cache keeps, so an unchanged job gives the same ``bytes`` object each call), after
        the same read barrier; None where GetJobs would forward to the leader (ask GetJobs then).
        No authorization: the caller authorizes ``GetJobs`` first."""
        jobs = await self.read_jobs(request, context)
        if jobs is None:
            return None
        frames = await map_in_slices(jobs, self.job_infos.framed)
        self.job_infos.prune(self.ctl.state.jobs)
        return frames

    async def WatchJob(self, request: pb.GetJobsRequest, context: CallContext) -> AsyncIterator[pb.JobInfo]:
        """Stream the job each time its state or reason changes, ending after a terminal state."""
        if len(request.job_ids) != 1:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "WatchJob takes exactly one job id")
        job_id = request.job_ids[0]
        last = None
        while True:
            changed = self.ctl.change_event()  # before the read: a change during the yield is not lost
            job = self.ctl.state.jobs.get(job_id)
            if job is None:
                raise RpcError(StatusCode.NOT_FOUND, f"Invalid job id specified: {job_id}")
            key = (job.state, job.reason, job.launched, len(job.allocation))
            if key != last:
                last = key
                # Decided from what is sent, not from the live record after the yield (by then it may
                # have ended, and its last state would never be sent).
                if key[0].is_terminal:
                    yield convert.job_to_proto(job, include_script=False)
                    return
                yield convert.job_to_proto(job, include_script=False)
            await changed.wait()

    @leader_only
    async def CancelJob(self, request: pb.CancelJobRequest, context: CallContext) -> pb.CancelJobResponse:
        ident = _caller(context)
        task = request.array_task_id if request.HasField("array_task_id") else None
        targets = self.ctl.state.resolve_targets(request.job_id, task)
        if not targets:
            raise RpcError(StatusCode.NOT_FOUND, f"Invalid job id specified: {request.job_id}")
        if request.HasField("step_id"):
            for job in targets:
                await self._signal_step(job, request.step_id, request.signal, ident)
            return pb.CancelJobResponse(state=targets[0].state.value)
        if request.signal:
            for job in targets:
                await self._signal(job, request.signal, ident, batch_only=request.batch_only, full=request.full)
            return pb.CancelJobResponse(state=targets[0].state.value)
        state = await self.ctl.propose(
            c.CancelJob(request.job_id, ident.uid, self.ctl.clock.wall(), task, admin=is_admin(ident, self.ctl.state))
        )
        self.ctl.kick_scheduler()
        return pb.CancelJobResponse(state=state)

    async def _signal(
        self, job, signal: int, ident: Identity, *, batch_only: bool = False, full: bool = False
    ) -> None:
        if not is_admin(ident, self.ctl.state) and ident.uid != job.uid:
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                permission_denied(f"signalling job {job.job_id} of another user"),
            )
        if job.state is not JobState.RUNNING or not job.launched:
            raise RpcError(StatusCode.FAILED_PRECONDITION, "Job is not running: cannot signal it")
        await self._tell_agents(
            job, pb.SignalJobRequest(job_id=job.job_id, signal=signal, batch_only=batch_only, full=full)
        )

    async def _signal_step(self, job, step_id: int, signal: int, ident: Identity) -> None:
        """``scancel <job>.<step>``: cancel (signal 0: SIGTERM, SIGKILL after the grace time) or signal
        that running step on every node of the job; the job and its other steps go on."""
        if not is_admin(ident, self.ctl.state) and ident.uid != job.uid:
            raise RpcError(
                StatusCode.PERMISSION_DENIED, permission_denied(f"cancelling a step of job {job.job_id} of another user")
            )
        step = next((s for s in job.steps if s.step_id == step_id), None)
        if step is None:
            raise RpcError(StatusCode.NOT_FOUND, f"Invalid job id specified: {job.job_id}.{step_id}")
        if job.state is not JobState.RUNNING or step.state is not JobState.RUNNING:
            raise RpcError(StatusCode.FAILED_PRECONDITION, f"Job step {job.job_id}.{step_id} is not running")
        await self._tell_agents(job, pb.SignalJobRequest(job_id=job.job_id, signal=signal, step_id=step_id))

    async def _tell_agents(self, job, request: pb.SignalJobRequest) -> None:
        """Send ``request`` to every agent of the job's allocation; unknown-job answers are fine."""
        from spur.rpc.pool import agent_pool

        async with agent_pool(self.ctl.auth.daemon_metadata, tls=self.ctl.client_tls) as pool:
            for a in job.allocation:
                node = self.ctl.state.nodes[a.node]
                stub = await pool.stub(node.address, node.port)
                try:
                    await stub.SignalJob(request, timeout=10)
                except RpcError as exc:
                    if exc.code is not StatusCode.NOT_FOUND:
                        raise

    @leader_only
    async def UpdateJob(self, request: pb.UpdateJobRequest, context: CallContext) -> pb.UpdateJobResponse:
        ident = _caller(context)

        def opt(name: str):
            return getattr(request, name) if request.HasField(name) else None

        action = request.action.lower()
        cmd = c.UpdateJob(
            job_id=request.job_id,
            requester_uid=ident.uid,
            time=self.ctl.clock.wall(),
            array_task_id=opt("array_task_id"),
            time_limit_secs=opt("time_limit_secs"),
            partition=opt("partition"),
            priority=opt("priority"),
            nice=opt("nice"),
            name=opt("name"),
            comment=opt("comment"),
            action=action,
            admin=is_admin(ident, self.ctl.state),
        )
        ids = await self.ctl.propose(cmd)
        for job_id in ids:
            job = self.ctl.state.jobs[job_id]
            if action in ("suspend", "resume"):
                await self._tell_agents(job, pb.SignalJobRequest(job_id=job_id, action=action))
            if cmd.time_limit_secs is not None and job.state.holds_resources and job.launched:
                limit = pb.SignalJobRequest(
                    job_id=job_id, action="set_time_limit", time_limit_secs=job.time_limit_secs
                )
                await self._tell_agents(job, limit)
        self.ctl.kick_scheduler()
        return pb.UpdateJobResponse(job_ids=ids)

    @leader_only
    async def CreateStep(self, request: pb.CreateStepRequest, context: CallContext) -> pb.CreateStepResponse:
        ident = _caller(context)
        spec = convert.step_spec_from_proto(request.spec)
        if not spec.argv:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "a step needs a command to run")
        spec.mpi = spec.mpi or self.ctl.cfg.controller.mpi_default
        try:
            check_mpi_type(spec.mpi)
        except ValueError as exc:
            raise RpcError(StatusCode.INVALID_ARGUMENT, str(exc)) from None
        step = await self.ctl.propose(
            c.CreateStep(request.job_id, spec, ident.uid, self.ctl.clock.wall(), admin=is_admin(ident, self.ctl.state))
        )
        job = self.ctl.state.jobs[request.job_id]
        return pb.CreateStepResponse(step=convert.step_to_proto(step), job=convert.job_to_proto(job))

    # ------------------------------------------------------------------ nodes and partitions

    def _node_info(self, name: str, partitions: dict[str, list[str]] | None = None) -> pb.NodeInfo:
        state = self.ctl.state
        node = state.nodes[name]
        used = state.usage(name)
        return pb.NodeInfo(
            name=node.name,
            address=node.address,
            port=node.port,
            cpus=node.cpus,
            memory_mb=node.memory_mb,
            gpus=[convert.gpu_to_proto(g) for g in node.gpus],
            state=state.node_state(name),
            reason=node.reason,
            alloc_cpus=node.cpus if used.exclusive else used.cpus,
            alloc_mem_mb=used.mem_mb,
            alloc_gpus=len(used.gpus),
            last_heartbeat=0.0,
            registered_time=node.registered_time,
            partitions=(partitions if partitions is not None else state.node_partitions()).get(name, []),
            version=node.version,
            boot_time=node.boot_time,
            features=node.features,
            sockets=node.sockets,
            cores_per_socket=node.cores_per_socket,
            threads_per_core=node.threads_per_core,
            arch=node.arch,
            os=node.os,
            reason_time=node.reason_time,
            comment=node.comment,
        )

    @leader_only
    async def GetNodes(self, request: pb.GetNodesRequest, context: CallContext) -> pb.GetNodesResponse:
        state = self.ctl.state
        names = sorted(state.nodes)
        if request.names:
            wanted = _expand_names(list(request.names))
            unknown = [n for n in wanted if n not in state.nodes]
            if unknown:
                raise RpcError(StatusCode.NOT_FOUND, f"Node {unknown[0]} not found")
            names = wanted
        membership = state.node_partitions()

        def info(name: str) -> pb.NodeInfo | None:
            return self._node_info(name, membership) if name in state.nodes else None  # gone meanwhile

        infos = await map_in_slices(names, info)
        return pb.GetNodesResponse(nodes=[i for i in infos if i is not None])

    @leader_only
    async def GetPartitions(
        self, request: pb.GetPartitionsRequest, context: CallContext
    ) -> pb.GetPartitionsResponse:
        state = self.ctl.state
        parts = list(state.partitions.values())
        if request.names:
            unknown = [n for n in request.names if n not in state.partitions]
            if unknown:
                raise RpcError(StatusCode.NOT_FOUND, f"Partition {unknown[0]} not found")
            parts = [state.partitions[n] for n in request.names]
        return pb.GetPartitionsResponse(
            partitions=[convert.partition_to_proto(p, state.partition_nodes(p)) for p in parts]
        )

    @leader_only
    async def UpdateNode(self, request: pb.UpdateNodeRequest, context: CallContext) -> pb.Empty:
        _require_admin(context, "updating nodes", self.ctl.state)
        names = _expand_names([request.nodes])
        await self.ctl.propose(c.UpdateNode(names, request.state, request.reason, self.ctl.clock.wall()))
        self.ctl.kick_scheduler()
        return pb.Empty()

    # ------------------------------------------------------------------ agents

    async def RegisterNode(
        self, request: pb.RegisterNodeRequest, context: CallContext
    ) -> pb.RegisterNodeResponse:
        if not request.name:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "node name is required")
        if not request.address:  # forwarded, the leader would see the forwarding controller as the peer
            request.address = context.peer.rsplit(":", 1)[0].strip("[]")
        if not self.ctl.is_leader:
            return await self.forward("RegisterNode", request, context)
        from spur.controller.admission import admit_registration

        credential = await admit_registration(self.ctl, request.name, request.join_token, context)
        address = request.address
        node = convert.node_from_register(request, address)
        await self.ctl.propose(c.RegisterNode(node, self.ctl.clock.wall()))
        self.ctl.last_seen[request.name] = trio.current_time()
        log.info(
            "node %s registered from %s:%s (%s cpus, %s MB, %s gpus)",
            node.name,
            address,
            node.port,
            node.cpus,
            node.memory_mb,
            len(node.gpus),
        )
        self.ctl.kick_scheduler()
        return pb.RegisterNodeResponse(
            heartbeat_interval_secs=int(self.ctl.cfg.controller.heartbeat_interval_secs),
            cluster_name=self.ctl.cfg.cluster_name,
            cluster_id=self.ctl.state.cluster_id,
            node_credential=credential,
        )

    def Heartbeat_now(self, request: pb.HeartbeatRequest, context: CallContext) -> pb.HeartbeatResponse | None:
        """A heartbeat answered from the connection's reader (see ``spur.rpc.server``): on a ready
        leader, for a node that is not coming back from DOWN and has lost no job, which is almost
        every heartbeat. None leaves the call to :meth:`Heartbeat` (a follower forwards it; a node's
        return and lost jobs are proposed there)."""
        if not self.ctl.leader_is_ready:
            return None
        check_node_credential(self.ctl, request.name, context, "heartbeat")
        node = self.ctl.state.nodes.get(request.name)
        if node is None:
            return pb.HeartbeatResponse(known=False)
        if node.down and node.reason == "Not responding":
            return None
        now = trio.current_time()
        if not self.ctl.launch_watch.quiet(self.ctl, request, now):
            return None
        self.ctl.last_seen[request.name] = now
        return self._heartbeat_answer()

    @leader_only
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: CallContext) -> pb.HeartbeatResponse:
        check_node_credential(self.ctl, request.name, context, "heartbeat")
        node = self.ctl.state.nodes.get(request.name)
        if node is None:
            return pb.HeartbeatResponse(known=False)
        self.ctl.last_seen[request.name] = trio.current_time()
        await self.ctl.launch_watch.heartbeat(self.ctl, request, trio.current_time())
        if node.down and node.reason == "Not responding":
            await self.ctl.propose(c.NodeReturned(request.name, self.ctl.clock.wall()))
            self.ctl.kick_scheduler()
        return self._heartbeat_answer()

    def _heartbeat_answer(self) -> pb.HeartbeatResponse:
        interval = int(self.ctl.cfg.controller.heartbeat_interval_secs)  # live: scontrol reconfigure
        return pb.HeartbeatResponse(
            known=True, heartbeat_interval_secs=interval, revocation_version=_revocation_version(self.ctl)
        )

    @leader_only
    async def ReportJobStatus(self, request: pb.JobStatusReport, context: CallContext) -> pb.Empty:
        cmd = self.report_command(request, context)
        if cmd is not None:
            await self.ctl.propose(cmd)
            self._report_committed(cmd)
        return pb.Empty()

    async def report_many(
        self, reports: list[pb.JobStatusReport], context: CallContext
    ) -> list[RpcError | None]:
        """Serve ``reports`` as ``ReportJobStatus`` calls would be (same checks, commands and errors),
        on the leader, with every accepted one proposed in one ``propose_many`` in the given order:
        each report's outcome, None when it succeeded."""
        outcomes: list[RpcError | None] = [None] * len(reports)
        cmds: list[c.StepExited | c.JobExited] = []
        positions: list[int] = []
        for i, report in enumerate(reports):
            try:
                cmd = self.report_command(report, context)
            except RpcError as exc:
                outcomes[i] = exc
                continue
            if cmd is not None:
                cmds.append(cmd)
                positions.append(i)
        if not cmds:
            return outcomes
        results = await self.ctl.propose_many(cmds)
        for i, cmd, result in zip(positions, cmds, results, strict=True):
            if isinstance(result, RpcError):
                outcomes[i] = result
            else:
                self._report_committed(cmd)
        return outcomes

    def report_command(
        self, request: pb.JobStatusReport, context: CallContext
    ) -> c.StepExited | c.JobExited | None:
        """The command a node's report of a finished job or step stands for; None for a job of another
        cluster (acknowledged, nothing to record). Raises RpcError for a node without a valid credential."""
        check_node_credential(self.ctl, request.node, context, "job report")
        span(request.job_id, "ctl.report-received")
        if request.cluster_id and request.cluster_id != self.ctl.state.cluster_id:
            # A job this node ran for another cluster (an earlier state dir): not ours, acknowledge it.
            log.info(
                "ignoring node %s's report of job %s of cluster %s (this is cluster %s)",
                request.node,
                request.job_id,
                request.cluster_id,
                self.ctl.state.cluster_id,
            )
            return None
        if request.HasField("step_id"):
            return c.StepExited(
                job_id=request.job_id,
                step_id=request.step_id,
                node=request.node,
                exit_code=request.exit_code,
                signal=request.signal,
                end_time=request.end_time or self.ctl.clock.wall(),
                cancelled=request.cancelled,
                launch_failed=request.launch_failed,
            )
        return c.JobExited(
            job_id=request.job_id,
            node=request.node,
            exit_code=request.exit_code,
            signal=request.signal,
            end_time=request.end_time or self.ctl.clock.wall(),
            timed_out=request.timed_out,
            cancelled=request.cancelled,
            launch_failed=request.launch_failed,
            message=request.message,
            out_of_memory=request.out_of_memory,
        )

    def _report_committed(self, cmd: c.StepExited | c.JobExited) -> None:
        if type(cmd) is c.JobExited:
            span(cmd.job_id, "ctl.exit-committed")
            self.ctl.kick_scheduler()

    async def GetControllerStatus(self, request: pb.Empty, context: CallContext) -> pb.ControllerInfo:
        st = self.ctl.raft.status()
        return pb.ControllerInfo(
            node_id=st["node_id"],
            address=self.ctl.client_address,
            role=str(st["role"]),
            term=st["term"],
            commit_index=st["commit_index"],
            applied_index=st["applied_index"],
            healthy=True,
            leader_address=self.ctl.leader_address() or "",
            cluster_id=self.ctl.state.cluster_id,
            cluster_name=self.ctl.cfg.cluster_name,
        )

    async def GetControllers(self, request: pb.Empty, context: CallContext) -> pb.GetControllersResponse:
        """Every controller's own view (role, term, indexes); unreachable ones are listed unhealthy."""
        mine = await self.GetControllerStatus(request, context)
        known = dict(self.ctl.state.controllers)
        known[self.ctl.node_id] = self.ctl.client_address
        for i, peer in enumerate(self.ctl.cfg.controller.peers, start=1):
            known.setdefault(i, f"(raft {peer})")
        infos = []
        for node_id in sorted(known):
            if node_id == self.ctl.node_id:
                infos.append(mine)
                continue
            address = known[node_id]
            try:
                if address.startswith("(raft"):
                    raise RpcError(StatusCode.UNAVAILABLE, "client address not announced yet")
                assert self.ctl.peer_pool is not None  # open while the controller serves
                stub = await self.ctl.peer_pool.stub(address)
                with trio.fail_after(2):
                    infos.append(
                        await stub.GetControllerStatus(
                            pb.Empty(), timeout=2, metadata=self.ctl.auth.daemon_metadata()
                        )
                    )
            except (RpcError, trio.TooSlowError):
                infos.append(
                    pb.ControllerInfo(node_id=node_id, address=address, role="unreachable", healthy=False)
                )
        return pb.GetControllersResponse(controllers=infos)

    @leader_only
    async def RegisterController(self, request: pb.ControllerInfo, context: CallContext) -> pb.Empty:
        await self.ctl.propose(c.AnnounceController(request.node_id, request.address))
        return pb.Empty()

    async def Reconfigure(self, request: pb.Empty, context: CallContext) -> pb.ReconfigureResponse:
        """Runs on the leader only: a follower forwards it and says so (``received_by`` is the
        follower, ``node_id`` the leader that applied it); see spur.controller.reconfig."""
        if not self.ctl.is_leader:
            resp = await self.forward("Reconfigure", request, context)
            resp.received_by = self.ctl.node_id
            return resp
        await self.ctl.leader_ready()
        _require_admin(context, "reconfigure", self.ctl.state)
        outcome = await self.ctl.reconfigure()
        return pb.ReconfigureResponse(
            applied=outcome.applied,
            node_id=self.ctl.node_id,
            not_applied=outcome.not_applied,
            received_by=self.ctl.node_id,
        )


def _revocation_version(ctl: ControllerHost) -> int:
    """The token deny-list's version (agents fetch the list when theirs differs)."""
    domain = ctl.state.domains.get("revocation")
    return int(getattr(domain, "version", 0))


def _expand_names(exprs: list[str]) -> list[str]:
    from spur.core.hostlist import HostlistError, expand

    names: list[str] = []
    for e in exprs:
        try:
            names.extend(expand(e))
        except HostlistError as exc:
            raise RpcError(StatusCode.INVALID_ARGUMENT, str(exc)) from None
    return names
