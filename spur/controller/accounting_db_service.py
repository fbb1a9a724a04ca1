"""The ``spur.acctdb.v1.AccountingDb`` gRPC service of spurctld: sacct/sreport reads and sdiag.

Served by the leader (a follower forwards, with the caller's metadata): the leader owns the flush
figures and its state is current. Reads come from PostgreSQL, completed with what PostgreSQL cannot
have yet (records still in the outbox, jobs not finished), so sacct shows a job exactly once whether
or not its record was flushed. Without ``database_url`` GetJobRecords and GetUsage answer
FAILED_PRECONDITION, and sacct reads the embedded history instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from spur.accounting.pgstore import JobQuery, StoreError
from spur.accounting.records import key_text, record_job
from spur.accounting.selection import job_matches
from spur.core.job import JobState
from spur.rpc.forwarding import LeaderGate, served_by_leader
from spur.rpc.proto import accounting_db_pb2 as apb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state.outbox import OutboxDomain

if TYPE_CHECKING:
    from spur.accounting.runtime import AccountingRuntime
    from spur.config import SpurConfig
    from spur.core.clock import Clock
    from spur.state.machine import ClusterState


class AccountingDbHost(LeaderGate, Protocol):
    """What the service needs of spurctld's controller (``spur.controller.app.Controller``); its
    methods are served on the leader, hence :class:`~spur.rpc.forwarding.LeaderGate`."""

    @property
    def accounting(self) -> AccountingRuntime: ...

    @property
    def state(self) -> ClusterState: ...

    @property
    def cfg(self) -> SpurConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def started_wall(self) -> float: ...

__all__ = ["AccountingDbService", "SERVICE"]

SERVICE = apb.DESCRIPTOR.services_by_name["AccountingDb"]
NO_DATABASE = "no accounting database is configured ([accounting] database_url)"


_leader_only = served_by_leader(SERVICE)


class AccountingDbService:
    def __init__(self, ctl: AccountingDbHost) -> None:
        self.ctl = ctl

    def _store(self) -> Any:
        runtime = self.ctl.accounting
        if not runtime.configured:
            raise RpcError(StatusCode.FAILED_PRECONDITION, NO_DATABASE)
        if runtime.store is None:
            raise RpcError(StatusCode.UNAVAILABLE, f"Problem talking to the database: {runtime.status.error}")
        return runtime.store

    @_leader_only
    async def GetJobRecords(
        self, request: apb.JobRecordsRequest, context: CallContext
    ) -> apb.JobRecordsResponse:
        from spur.rpc.convert import job_to_proto

        store = self._store()
        query = JobQuery(
            cluster_id=self.ctl.state.cluster_id,
            start=request.start_time,
            end=request.end_time,
            users=list(request.users),
            accounts=list(request.accounts),
            partitions=list(request.partitions),
            names=list(request.names),
            states=list(request.states),
            jobs=[(s.job_id, s.array_task_id if s.has_task else None) for s in request.jobs],
        )
        try:
            records = await store.jobs(query)
        except StoreError as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"Problem talking to the database: {exc}") from None
        jobs = {key_text(r["job_id"], r["submit_time"]): record_job(r) for r in records}
        # Newer than the database: records waiting in the outbox, then jobs still queued or running.
        for key, rec in self.ctl.state.domain(OutboxDomain).records.items():
            job = record_job(rec)
            if job_matches(job, query):
                jobs[key] = job
        for job in self.ctl.state.jobs.values():
            if not job.state.is_terminal and job_matches(job, query):
                jobs[key_text(job.job_id, job.submit_time)] = job
        ordered = sorted(jobs.values(), key=lambda j: (j.job_id, j.submit_time))
        return apb.JobRecordsResponse(
            jobs=[job_to_proto(j, include_script=False).SerializeToString() for j in ordered],
            source="postgresql",
        )

    @_leader_only
    async def GetUsage(self, request: apb.UsageRequest, context: CallContext) -> apb.UsageResponse:
        store = self._store()
        start, end = request.start_time, request.end_time
        if end <= start:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "the report's end must be after its start")
        try:
            rows = await store.usage(
                self.ctl.state.cluster_id,
                start,
                end,
                users=list(request.users),
                accounts=list(request.accounts),
            )
        except StoreError as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"Problem talking to the database: {exc}") from None
        nodes = self.ctl.state.nodes.values()
        period = end - start
        allocated = sum(r.cpu_seconds for r in rows)
        shown = rows[: request.top_count] if request.top_count else rows
        return apb.UsageResponse(
            cluster_name=self.ctl.cfg.cluster_name,
            start_time=start,
            end_time=end,
            usage=[
                apb.AssocUsage(
                    account=r.account, user=r.user, cpu_seconds=r.cpu_seconds, gpu_seconds=r.gpu_seconds
                )
                for r in shown
            ],
            allocated_cpu_seconds=allocated,
            reported_cpu_seconds=sum(n.cpus for n in nodes) * period,
            down_cpu_seconds=sum(n.cpus for n in nodes if n.down) * period,
        )

    @_leader_only
    async def GetDiag(self, request: apb.DiagRequest, context: CallContext) -> apb.DiagResponse:
        ctl = self.ctl
        state = ctl.state
        status = ctl.accounting.status
        outbox = state.domain(OutboxDomain)
        counts = {s: 0 for s in JobState}
        for job in state.jobs.values():
            counts[job.state] += 1
        return apb.DiagResponse(
            server_start_time=ctl.started_wall,
            now=ctl.clock.wall(),
            jobs_submitted=state.next_job_id - 1,
            jobs_started=sum(1 for j in state.jobs.values() if j.start_time),
            jobs_completed=counts[JobState.COMPLETED],
            jobs_canceled=counts[JobState.CANCELLED],
            jobs_failed=counts[JobState.FAILED] + counts[JobState.NODE_FAIL] + counts[JobState.TIMEOUT],
            jobs_pending=counts[JobState.PENDING],
            jobs_running=counts[JobState.RUNNING] + counts[JobState.COMPLETING] + counts[JobState.SUSPENDED],
            database_configured=status.configured,
            database_url=status.display_url,
            database_status=status.state,
            database_error=status.error,
            schema_version=status.schema_version,
            outbox_depth=outbox.depth,
            outbox_dropped=outbox.dropped,
            outbox_enabled=outbox.enabled,
            last_flush_time=status.last_flush_time,
            last_flush_records=status.last_flush_records,
            last_flush_rate=status.last_flush_rate,
            records_flushed=status.records_flushed,
            flush_errors=status.flush_errors,
            cluster_name=ctl.cfg.cluster_name,
            cluster_id=state.cluster_id,
        )
