"""A simulated fleet: ONE process that speaks the real agent protocol for many virtual nodes.

The fleet serves the ``spur.v1.Agent`` gRPC service on one port for every virtual node (a launch's
``LaunchJobRequest.node`` says which node it is for), registers each node with the controller
(``RegisterNode`` with the fleet's own address and port, so the controller's dispatcher talks to the
fleet exactly as to real agents), heartbeats each node every ``heartbeat_secs`` with the nodes' start
times spread evenly over the interval, "runs" launched jobs for a time drawn from ``runtime`` and then
reports them with ``ReportJobStatus``; ``SignalJob`` with signal 0 (cancel), SIGTERM, SIGINT or SIGKILL
ends a job at once, reported as the real agent reports it.

Use it in-process (``async with`` a nursery and ``await nursery.start(fleet.run)``) or from the shell::

    python -m integration.fleet --controller 127.0.0.1:6817 --nodes 5000 --heartbeat 30 \
        --stats-file /tmp/fleet.json

Contract: :meth:`Fleet.run` returns (via ``task_status``) the bound agent port once every node is
registered; it serves until cancelled. :attr:`Fleet.stats` is updated live. Nothing here asserts: tests
and benchmarks judge the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import random
import signal as signal_module
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from spur.rpc.proto import batch_pb2 as bpb
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, Server
from spur.rpc.status import RpcError, StatusCode

__all__ = [
    "Fleet",
    "FleetConfig",
    "FleetError",
    "FleetStats",
    "RuntimeFn",
    "exponential_runtime",
    "fixed_runtime",
]

log = logging.getLogger("integration.fleet")

#: ``runtime(rng, job) -> seconds`` the virtual job runs before it exits 0.
RuntimeFn = Callable[[random.Random, pb.JobInfo], float]

_ENDING_SIGNALS = {0, int(signal_module.SIGTERM), int(signal_module.SIGINT), int(signal_module.SIGKILL)}
_REPORT_ATTEMPTS = 8


def fixed_runtime(seconds: float) -> RuntimeFn:
    """Every job runs exactly ``seconds``."""
    return lambda rng, job: seconds


def exponential_runtime(mean: float, cap: float = math.inf) -> RuntimeFn:
    """Run times drawn from an exponential distribution with ``mean`` seconds, at most ``cap``."""
    return lambda rng, job: min(cap, rng.expovariate(1.0 / mean)) if mean > 0 else 0.0


@dataclass(frozen=True)
class FleetConfig:
    """What the fleet looks like. ``runtime`` defaults to exponential with a 1 s mean."""

    controller: str
    nodes: int = 200
    prefix: str = "sim"
    cpus: int = 8
    memory_mb: int = 32000
    gpus: int = 0
    gpu_model: str = "a100"
    heartbeat_secs: float = 30.0
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    #: HTTP/2 connections to the controller; the fleet's RPCs are spread over them round-robin.
    connections: int = 8
    #: Registrations in flight at once while the fleet comes up.
    register_concurrency: int = 64
    runtime: RuntimeFn = field(default=exponential_runtime(1.0))
    seed: int = 0
    # A directory with ca.crt, node.crt, node.key (spur cert): serve the agent service with TLS required
    # and reach the controller over TLS, presenting node.crt. None: plaintext.
    tls_dir: Path | None = None
    #: Report job ends in batches (spur.batch.v1.ControllerBatch/ReportJobStatuses) rather than one
    #: ReportJobStatus call each; falls back to single calls on a controller without the batch service.
    batch_reports: bool = True

    def node_names(self) -> list[str]:
        width = max(len(str(self.nodes)), 4)
        return [f"{self.prefix}{i:0{width}d}" for i in range(1, self.nodes + 1)]


@dataclass
class FleetStats:
    """Live counters; ``heartbeat_latencies`` are seconds per Heartbeat RPC (all of them)."""

    registered: int = 0
    registrations: int = 0
    heartbeats: int = 0
    heartbeat_failures: int = 0
    heartbeats_unknown: int = 0
    heartbeat_latencies: list[float] = field(default_factory=list)
    heartbeat_max_lateness: float = 0.0
    launches: int = 0
    duplicate_launches: int = 0
    completed: int = 0
    cancelled: int = 0
    timed_out: int = 0
    report_failures: int = 0
    report_batches: int = 0  # ReportJobStatuses calls sent
    launch_batches: int = 0  # LaunchJobs calls served
    running: int = 0

    def summary(self) -> dict[str, Any]:
        """Counters plus heartbeat latency percentiles (ms), without the raw latency list."""
        out = {k: v for k, v in asdict(self).items() if k != "heartbeat_latencies"}
        lat = sorted(self.heartbeat_latencies)
        for name, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
            out[f"heartbeat_{name}_ms"] = 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0.0
        # the last heartbeat round (one per node): what the latest load did to heartbeats
        recent = sorted(self.heartbeat_latencies[-max(1, self.registered) :])
        out["heartbeat_recent_p99_ms"] = (
            1000 * recent[min(len(recent) - 1, int(0.99 * len(recent)))] if recent else 0.0
        )
        return out


@dataclass(eq=False)
class _SimJob:
    job_id: int
    node: str
    started: float
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    ending_signal: int | None = None
    finished: trio.Event = field(default_factory=trio.Event)


class FleetError(Exception):
    """The fleet cannot start (e.g. its controller does not answer)."""


class Fleet:
    """The simulated nodes, their agent service and their controller traffic (see module docstring)."""

    def __init__(self, cfg: FleetConfig) -> None:
        if cfg.nodes < 1:
            raise ValueError(f"a fleet needs at least one node, got nodes={cfg.nodes}")
        if cfg.heartbeat_secs <= 0:
            raise ValueError(f"heartbeat_secs must be positive, got {cfg.heartbeat_secs}")
        self.cfg = cfg
        self.names = cfg.node_names()
        self._known = set(self.names)
        self.stats = FleetStats()
        self.port: int | None = None
        self.jobs: dict[tuple[int, str], _SimJob] = {}
        self._by_job: dict[int, dict[str, _SimJob]] = {}
        self._by_node: dict[str, set[int]] = {}
        self._rng = random.Random(cfg.seed)
        self._stubs: list[Any] = []
        self._next_stub = 0
        self._nursery: trio.Nursery | None = None
        self.boot_time = time.time()
        self._batch_stubs: list[Any] = []
        self._report_queue: list[tuple[pb.JobStatusReport, trio.Event]] = []
        self._report_wakeup = trio.Event()

    # ------------------------------------------------------------------ controller calls

    def _stub(self) -> Any:
        stub = self._stubs[self._next_stub % len(self._stubs)]
        self._next_stub += 1
        return stub

    async def call(self, method: str, request: Any, timeout: float = 30.0) -> Any:
        """One Controller RPC on the next connection of the pool."""
        return await getattr(self._stub(), method)(request, timeout=timeout)

    def register_request(self, name: str) -> pb.RegisterNodeRequest:
        cfg = self.cfg
        return pb.RegisterNodeRequest(
            name=name,
            address=cfg.listen_host,
            port=self.port or 0,
            cpus=cfg.cpus,
            memory_mb=cfg.memory_mb,
            gpus=[pb.GpuDevice(index=i, vendor="nvidia", model=cfg.gpu_model) for i in range(cfg.gpus)],
            running_job_ids=sorted(self._by_node.get(name, ())),
            version="fleet-sim",
            boot_time=self.boot_time,
            sockets=1,
            cores_per_socket=cfg.cpus,
            threads_per_core=1,
            arch="x86_64",
            os="Linux",
        )

    async def register(self, name: str) -> None:
        """Register ``name``, retrying (capped backoff) until the controller accepts."""
        backoff = 0.2
        while True:
            try:
                await self.call("RegisterNode", self.register_request(name))
                self.stats.registrations += 1
                return
            except RpcError as exc:
                log.warning("registering %s failed (%s); retry in %.1fs", name, exc, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _register_all(self) -> None:
        limiter = trio.CapacityLimiter(self.cfg.register_concurrency)

        async def one(name: str) -> None:
            async with limiter:
                await self.register(name)
                self.stats.registered += 1

        async with trio.open_nursery() as nursery:
            for name in self.names:
                nursery.start_soon(one, name)

    async def _heartbeat(self, name: str) -> None:
        running = sorted(self._by_node.get(name, ()))
        began = trio.current_time()
        try:
            answer = await self.call("Heartbeat", pb.HeartbeatRequest(name=name, running_job_ids=running))
        except RpcError as exc:
            self.stats.heartbeat_failures += 1
            log.warning("heartbeat of %s failed: %s", name, exc)
            return
        self.stats.heartbeat_latencies.append(trio.current_time() - began)
        self.stats.heartbeats += 1
        if not answer.known:
            self.stats.heartbeats_unknown += 1
            await self.register(name)

    async def _heartbeat_loop(self, nursery: trio.Nursery) -> None:
        """Node i beats at ``t0 + i * interval / n`` in every interval: an even spread, never a burst."""
        interval = self.cfg.heartbeat_secs
        step = interval / len(self.names)
        t0 = trio.current_time()
        cycle = 0
        while True:
            base = t0 + cycle * interval
            for i, name in enumerate(self.names):
                due = base + i * step
                now = trio.current_time()
                if due > now:
                    await trio.sleep_until(due)
                else:
                    self.stats.heartbeat_max_lateness = max(self.stats.heartbeat_max_lateness, now - due)
                nursery.start_soon(self._heartbeat, name)
            cycle += 1

    # ------------------------------------------------------------------ jobs

    def launch(self, request: pb.LaunchJobRequest) -> bool:
        """Start a virtual job; True if it was already running (duplicate launch)."""
        key = (request.job.job_id, request.node)
        if key in self.jobs:
            self.stats.duplicate_launches += 1
            return True
        job = _SimJob(request.job.job_id, request.node, trio.current_time())
        self.jobs[key] = job
        self._by_job.setdefault(job.job_id, {})[job.node] = job
        self._by_node.setdefault(job.node, set()).add(job.job_id)
        self.stats.launches += 1
        self.stats.running = len(self.jobs)
        runtime = max(0.0, float(self.cfg.runtime(self._rng, request.job)))
        limit = request.job.time_limit_secs
        assert self._nursery is not None
        self._nursery.start_soon(self._run_job, job, runtime, limit, name=f"simjob-{key[0]}@{key[1]}")
        return False

    async def _run_job(self, job: _SimJob, runtime: float, limit: int) -> None:
        timed_out = limit > 0 and runtime > limit
        with job.scope:
            await trio.sleep(limit if timed_out else runtime)
        report = pb.JobStatusReport(job_id=job.job_id, node=job.node, end_time=time.time())
        if job.ending_signal is not None:
            report.cancelled = job.ending_signal == 0
            report.signal = int(signal_module.SIGTERM) if job.ending_signal == 0 else job.ending_signal
            self.stats.cancelled += 1
        elif timed_out:
            report.timed_out = True
            report.signal = int(signal_module.SIGKILL)
            self.stats.timed_out += 1
        else:
            self.stats.completed += 1
        await self._report(report)
        self._forget(job)
        self.stats.running = len(self.jobs)
        job.finished.set()

    async def _report(self, report: pb.JobStatusReport) -> None:
        if not (self.cfg.batch_reports and self._batch_stubs):
            await self._report_single(report)
            return
        delivered = trio.Event()
        self._report_queue.append((report, delivered))
        self._report_wakeup.set()
        await delivered.wait()

    async def _report_sender(self) -> None:
        """Send queued reports together, up to 512 per call; what the batch did not deliver goes the
        single-call way (with its retries); a controller without the batch service turns batching off."""
        from spur.rpc.batching import outcome_error

        assert self._nursery is not None
        while True:
            if not self._report_queue:
                self._report_wakeup = trio.Event()
                await self._report_wakeup.wait()
                continue
            batch, self._report_queue = self._report_queue[:512], self._report_queue[512:]
            stub = self._batch_stubs[self._next_stub % len(self._batch_stubs)]
            self._next_stub += 1
            request = bpb.JobStatusReports(reports=[r.SerializeToString() for r, _ in batch])
            try:
                answer = await stub.ReportJobStatuses(request, timeout=30.0)
                errors = [outcome_error(o) for o in answer.outcomes]
            except RpcError as exc:
                if exc.code is StatusCode.UNIMPLEMENTED:
                    self.cfg = dataclasses.replace(self.cfg, batch_reports=False)
                errors = [exc] * len(batch)
            self.stats.report_batches += 1
            for (report, delivered), error in zip(batch, errors, strict=True):
                if error is None:
                    delivered.set()
                else:
                    self._nursery.start_soon(self._report_then_set, report, delivered)

    async def _report_then_set(self, report: pb.JobStatusReport, delivered: trio.Event) -> None:
        await self._report_single(report)
        delivered.set()

    async def _report_single(self, report: pb.JobStatusReport) -> None:
        delay = 0.2
        for attempt in range(_REPORT_ATTEMPTS):
            try:
                await self.call("ReportJobStatus", report)
                return
            except RpcError as exc:
                if attempt == _REPORT_ATTEMPTS - 1:
                    self.stats.report_failures += 1
                    log.error("job %s: giving up reporting its end: %s", report.job_id, exc)
                    return
                await trio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _forget(self, job: _SimJob) -> None:
        self.jobs.pop((job.job_id, job.node), None)
        on_nodes = self._by_job.get(job.job_id, {})
        on_nodes.pop(job.node, None)
        if not on_nodes:
            self._by_job.pop(job.job_id, None)
        self._by_node.get(job.node, set()).discard(job.job_id)

    def jobs_of(self, job_id: int) -> list[_SimJob]:
        """The virtual tasks of ``job_id`` running in this fleet (one per node)."""
        return list(self._by_job.get(job_id, {}).values())

    def signal(self, job_id: int, sig: int) -> None:
        """Deliver ``sig`` to every virtual task of the job; raises KeyError if none runs here."""
        found = self.jobs_of(job_id)
        if not found:
            raise KeyError(job_id)
        if sig in _ENDING_SIGNALS:
            for job in found:
                if job.ending_signal is None:
                    job.ending_signal = sig
                job.scope.cancel()

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        from spur.auth.identity import identity_metadata
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import controller_stub

        server = Server()
        agent_service = _AgentService(self)
        server.add_service(pb.DESCRIPTOR.services_by_name["Agent"], agent_service)
        from spur.rpc.batching import AGENT_BATCH

        server.add_service(AGENT_BATCH, _AgentBatchService(agent_service))
        md = identity_metadata()
        server_tls = client_tls = None
        if self.cfg.tls_dir is not None:
            from spur.rpc.tls import TlsContexts, TlsSettings

            d = self.cfg.tls_dir
            tls = TlsContexts(
                TlsSettings(
                    mode="required", cert_file=d / "node.crt", key_file=d / "node.key", ca_file=d / "ca.crt"
                )
            )
            server_tls, client_tls = tls.server(), tls.client()
        async with open_channel(self.cfg.controller, metadata_provider=lambda: md, tls=client_tls) as probe:
            try:
                await controller_stub(probe).GetControllers(pb.Empty(), timeout=10)
            except RpcError as exc:
                raise FleetError(f"controller {self.cfg.controller} does not answer: {exc.message}") from None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.port = await nursery.start(
                partial(server.serve, tls=server_tls), self.cfg.listen_host, self.cfg.listen_port
            )
            for _ in range(max(1, self.cfg.connections)):
                channel = await nursery.start(_hold_channel, self.cfg.controller, md, client_tls)
                self._stubs.append(controller_stub(channel))
                from spur.rpc.batching import CONTROLLER_BATCH
                from spur.rpc.stub import Stub

                self._batch_stubs.append(Stub(channel, CONTROLLER_BATCH))
            nursery.start_soon(self._report_sender, name="fleet-report-sender")
            await self._register_all()
            log.info("fleet of %d nodes registered; agent port %d", len(self.names), self.port)
            nursery.start_soon(self._heartbeat_loop, nursery, name="fleet-heartbeats")
            task_status.started(self.port)


async def _hold_channel(
    target: str,
    md: dict[str, str],
    tls: Any = None,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    from spur.rpc.channel import open_channel

    async with open_channel(target, metadata_provider=lambda: md, tls=tls) as channel:
        task_status.started(channel)
        await trio.sleep_forever()


class _AgentBatchService:
    """``spur.batch.v1.AgentBatch``: many launches in one call, each served as its LaunchJob."""

    def __init__(self, agent: _AgentService) -> None:
        self.agent = agent

    async def LaunchJobs(self, request: bpb.LaunchJobsRequest, context: CallContext) -> bpb.BatchOutcomes:
        from spur.rpc.batching import serve_items

        self.agent.fleet.stats.launch_batches += 1
        return await serve_items(
            request.launches,
            pb.LaunchJobRequest.FromString,
            lambda req: self.agent.LaunchJob(req, context),
            key=lambda req: (req.job.job_id, req.node),
            fill=lambda outcome, resp: setattr(outcome, "already_running", resp.already_running),
        )


class _AgentService:
    """``spur.v1.Agent`` for every virtual node of one fleet."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def _check_node(self, node: str) -> None:
        if node not in self.fleet._known:
            raise RpcError(StatusCode.NOT_FOUND, f"node {node!r} is not part of this fleet")

    async def LaunchJob(self, request: pb.LaunchJobRequest, context: CallContext) -> pb.LaunchJobResponse:
        if request.job.job_id == 0:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "LaunchJob needs a job with a non-zero job_id")
        self._check_node(request.node)
        if not request.batch and not request.job.spec.interactive:
            return pb.LaunchJobResponse(already_running=False)  # secondary node of a batch job
        return pb.LaunchJobResponse(already_running=self.fleet.launch(request))

    async def SignalJob(self, request: pb.SignalJobRequest, context: CallContext) -> pb.Empty:
        try:
            self.fleet.signal(request.job_id, request.signal)
        except KeyError:
            raise RpcError(StatusCode.NOT_FOUND, f"job {request.job_id} is not running here") from None
        return pb.Empty()

    async def StreamOutput(
        self, request: pb.StreamOutputRequest, context: CallContext
    ) -> AsyncIterator[pb.OutputChunk]:
        jobs = self.fleet.jobs_of(request.job_id)
        if not jobs:
            raise RpcError(StatusCode.NOT_FOUND, f"job {request.job_id} is not running here")
        if request.follow:
            for job in jobs:
                await job.finished.wait()
        yield pb.OutputChunk(stream="exit", exit_code=0)

    async def Status(self, request: pb.Empty, context: CallContext) -> pb.AgentStatus:
        return pb.AgentStatus(
            name=f"{self.fleet.cfg.prefix}[fleet of {len(self.fleet.names)}]",
            jobs=[pb.AgentJob(job_id=j.job_id, start_time=j.started) for j in self.fleet.jobs.values()],
        )


# ---------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Simulated fleet of Spur agents (one process, many nodes).")
    ap.add_argument("--controller", required=True, help="controller host:port")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--prefix", default="sim")
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--memory-mb", type=int, default=32000)
    ap.add_argument("--gpus", type=int, default=0)
    ap.add_argument("--heartbeat", type=float, default=30.0, help="seconds between a node's heartbeats")
    ap.add_argument("--runtime-mean", type=float, default=1.0, help="mean job run time (exponential), s")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--listen", default="127.0.0.1:0", help="agent service host:port")
    ap.add_argument("--stats-file", type=Path, help="rewrite this JSON file with the stats every second")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tls-dir", type=Path, help="ca.crt + node.crt/node.key: TLS required both ways")
    args = ap.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    cfg = FleetConfig(
        controller=args.controller,
        nodes=args.nodes,
        prefix=args.prefix,
        cpus=args.cpus,
        memory_mb=args.memory_mb,
        gpus=args.gpus,
        heartbeat_secs=args.heartbeat,
        listen_host=host or "127.0.0.1",
        listen_port=int(port or 0),
        connections=args.connections,
        runtime=exponential_runtime(args.runtime_mean),
        seed=args.seed,
        tls_dir=args.tls_dir,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    fleet = Fleet(cfg)

    failed: list[FleetError] = []

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            began = time.monotonic()
            try:
                await nursery.start(fleet.run)
            except FleetError as exc:
                print(f"fleet: {exc}", file=sys.stderr)
                failed.append(exc)
                return
            up_secs = time.monotonic() - began
            print(f"fleet up: {cfg.nodes} nodes registered in {up_secs:.1f}s, port {fleet.port}", flush=True)
            while True:
                if args.stats_file:
                    summary = fleet.stats.summary() | {"register_secs": up_secs, "port": fleet.port}
                    tmp = args.stats_file.with_suffix(".tmp")
                    tmp.write_text(json.dumps(summary))
                    tmp.replace(args.stats_file)
                await trio.sleep(1.0)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
