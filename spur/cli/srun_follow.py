"""srun outside an allocation, without an event loop: submit, follow the job, stream its output.

``srun true`` is interactive: its whole wall time is what the user waits for, and importing Trio
alone was more than half of it. This path uses the blocking client (:mod:`spur.rpc.blocking`):

1. SubmitJob, retried with Slurm's back-off while the controller is full (:mod:`spur.cli.busy`);
2. WatchJob on the same connection: Slurm's "queued and waiting" lines once the job has a reason;
3. once the job runs, GetNodes (on a second connection: the first carries the watch) and one
   StreamOutput per allocated node (NOT_FOUND until the launch reaches that agent: retried with
   back-off for up to ``LAUNCH_WAIT_SECS``);
4. every stream and a :class:`spur.cli.signal_pipe.SignalPipe` are followed by one select() loop;
   SIGINT/SIGTERM cancel the job with Slurm's words and srun exits 1;
5. the exit code: the largest of the nodes' codes, 128+signal for a signal, 1 for a job that ended
   CANCELLED/TIMEOUT/NODE_FAIL with code 0.

The decisions are in :class:`Follow` (no I/O of its own: it is handed messages and says what to open
and print); :func:`run_job` is the loop around it.
"""

from __future__ import annotations

import sys
import time

from spur.cli.client import CliError, call_metadata, client_tls, controller_targets
from spur.cli.interactive import call_once, submit
from spur.trace import span

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spur.core.jobspec import JobSpec
    from spur.rpc.blocking import BlockingChannel, BlockingStream
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.tls import ClientTLS

PROG = "srun"
# How long srun waits for an allocated node's agent to receive the job's launch before giving up.
LAUNCH_WAIT_SECS = 60.0
# Pending reasons for which Slurm's srun says the partition cannot take the job as it stands.
PARTITION_LIMIT_REASONS = frozenset({"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit"})
_UNSTARTED_ENDS = frozenset({"PENDING", "RUNNING", "COMPLETING"})


class Follow:
    """What srun makes of one job's updates (pure: it returns what to say; the loop does the I/O).

    ``on_job`` takes each WatchJob message and returns the lines for stderr; once the job holds its
    allocation :attr:`nodes_wanted` names the nodes to stream from (once). ``on_exit`` records one
    node's exit chunk. :meth:`exit_code` is srun's code once the job's final record is in."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.said_waiting = False
        self.allocated = False
        self.nodes_wanted: list[str] = []
        self.final: pb.JobInfo | None = None
        self.results: list[tuple[int, int]] = []  # (exit code, signal) per node

    def on_job(self, info: pb.JobInfo) -> list[str]:
        """Lines to print for this update; raises CliError when the job ended before it started."""
        lines: list[str] = []
        job_id = self.job_id
        # Like Slurm, say nothing while the job can start at once: only once the scheduler has looked
        # at it and given a reason (Resources, Priority, PartitionConfig, ...) does srun say it waits.
        if info.state == "PENDING" and not self.said_waiting and info.reason not in ("", "None"):
            if info.reason in PARTITION_LIMIT_REASONS:
                lines.append("srun: Requested partition configuration not available now")
            lines.append(f"srun: job {job_id} queued and waiting for resources")
            self.said_waiting = True
        if not self.allocated and info.state in ("RUNNING", "COMPLETING") and info.allocation:
            span(job_id, "cli.running-seen")
            self.allocated = True
            self.nodes_wanted = [a.node for a in info.allocation]
            if self.said_waiting:
                lines.append(f"srun: job {job_id} has been allocated resources")
        if info.state not in _UNSTARTED_ENDS:
            if not self.allocated:
                raise CliError(
                    f"srun: error: job {job_id} ended {info.state} before it started: {info.reason}"
                )
            self.final = info
        return lines

    def on_watch_end(self) -> None:
        """The controller ended the stream; it does so only after a terminal state."""
        if self.final is None and not self.allocated:
            raise CliError(
                f"srun: error: job {self.job_id}: the controller stopped reporting it before it started"
            )

    def on_exit(self, exit_code: int, signal: int) -> None:
        span(self.job_id, "cli.exit-seen")
        self.results.append((exit_code, signal))

    def closing_lines(self) -> list[str]:
        final = self.final
        if final is not None and final.state == "TIMEOUT":
            return [f"srun: error: job {self.job_id}: time limit exceeded"]
        if final is not None and final.state == "CANCELLED":
            return [f"srun: error: job {self.job_id} was cancelled"]
        return []

    def exit_code(self) -> int:
        exit_code = max((code for code, _ in self.results), default=0)
        sig = max((s for _, s in self.results), default=0)
        if sig:
            return 128 + sig
        final = self.final
        if final is not None and final.state in ("CANCELLED", "TIMEOUT", "NODE_FAIL") and exit_code == 0:
            return 1
        return exit_code


class _NodeOutput:
    """One node's StreamOutput, opened again (with back-off) while the agent has not got the launch."""

    def __init__(self, name: str, target: str, job_id: int, label: bool) -> None:
        self.name, self.target, self.job_id, self.label = name, target, job_id, label
        self.channel: BlockingChannel | None = None
        self.stream: BlockingStream[pb.OutputChunk] | None = None
        self.retry_at: float | None = time.monotonic()  # when to (re)open; None while open or done
        self.deadline = time.monotonic() + LAUNCH_WAIT_SECS
        self.delay = 0.05
        self.done = False

    def open(self) -> None:
        from spur.rpc.blocking import BlockingChannel
        from spur.rpc.proto import spur_pb2 as pb

        self.retry_at = None
        self.channel = BlockingChannel(self.target, metadata=call_metadata(), tls=client_tls())
        self.stream = self.channel.stream(
            "/spur.v1.Agent/StreamOutput",
            pb.StreamOutputRequest(job_id=self.job_id, follow=True),
            pb.OutputChunk,
        )

    def failed(self, code: object, message: str, follow: Follow) -> None:
        """The stream failed: open it again later while the launch may still be on its way."""
        from spur.rpc.status import StatusCode

        self.close()
        now = time.monotonic()
        if code is StatusCode.NOT_FOUND and now < self.deadline:
            self.retry_at = now + self.delay
            self.delay = min(self.delay * 2, 1.0)
            return
        print(f"srun: error: {self.name}: lost output stream: {message}", file=sys.stderr)
        follow.results.append((1, 0))
        self.done = True

    def deliver(self, chunks: list[pb.OutputChunk], follow: Follow) -> None:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        for chunk in chunks:
            if chunk.stream == "task_exit":
                continue  # the node's exit chunk decides an interactive job's code
            if chunk.stream == "exit":
                follow.on_exit(chunk.exit_code, chunk.signal)
                continue
            stream = out if chunk.stream == "stdout" else err
            data = chunk.data
            if self.label:
                data = b"".join(f"{chunk.task}: ".encode() + line for line in data.splitlines(keepends=True))
            stream.write(data)
            stream.flush()

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
        self.channel = self.stream = None


def run_job(spec: JobSpec, label: bool) -> int:
    """Submit ``spec`` as an interactive job and follow it to its end; srun's exit code. CliError."""
    from spur.rpc.blocking import BlockingChannel
    from spur.rpc.convert import spec_to_proto
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    metadata = call_metadata()  # a credential problem is one clear error before anything starts
    target = controller_targets()[0]
    tls = client_tls()
    ctl = BlockingChannel(target, metadata=metadata, tls=tls)
    try:
        job_id = submit(
            ctl, pb.SubmitJobRequest(spec=spec_to_proto(spec)), PROG, "Unable to allocate resources: "
        )
        span(job_id, "cli.submitted")
        follow = Follow(job_id)
        try:
            watch = ctl.stream(
                "/spur.v1.Controller/WatchJob", pb.GetJobsRequest(job_ids=[job_id]), pb.JobInfo
            )
            return _follow(follow, watch, target, tls, label)
        except RpcError as exc:
            raise CliError(f"srun: error: {exc.message}") from None
    finally:
        ctl.close()


def _follow(
    follow: Follow, watch: BlockingStream[pb.JobInfo], target: str, tls: ClientTLS | None, label: bool
) -> int:
    import signal

    from spur.cli.signal_pipe import SignalPipe
    from spur.rpc.blocking import wait_readable
    from spur.rpc.status import RpcError

    nodes: list[_NodeOutput] = []
    try:
        with SignalPipe(signal.SIGINT, signal.SIGTERM) as signals:
            while not (watch.done and (not follow.allocated or all(n.done for n in nodes))):
                now = time.monotonic()
                for node in nodes:
                    if node.retry_at is not None and node.retry_at <= now:
                        try:
                            node.open()
                        except RpcError as exc:
                            node.failed(exc.code, exc.message, follow)
                open_streams = [n.stream for n in nodes if n.stream is not None]
                timers = [n.retry_at for n in nodes if n.retry_at is not None]
                timeout = max(0.0, min(timers) - now) if timers else None
                ready, fds = wait_readable([watch, *open_streams], [signals.fileno()], timeout)
                if fds and signals.take():
                    return _cancel(follow, target, tls)
                for stream in ready:
                    if stream is watch:
                        for info in watch.read_available():
                            _say(follow.on_job(info))
                        if watch.done:
                            follow.on_watch_end()
                        if follow.nodes_wanted and not nodes:
                            nodes = _node_outputs(follow, target, tls, label)
                        continue
                    node = next(n for n in nodes if n.stream is stream)
                    try:
                        node.deliver(stream.read_available(), follow)
                    except RpcError as exc:
                        node.failed(exc.code, exc.message, follow)
                        continue
                    if stream.done:
                        node.done = True
                        node.close()
    finally:
        for node in nodes:
            node.close()
    span(follow.job_id, "cli.end-seen")
    _say(follow.closing_lines())
    return follow.exit_code()


def _node_outputs(follow: Follow, target: str, tls: ClientTLS | None, label: bool) -> list[_NodeOutput]:
    """The allocated nodes' addresses (GetNodes on a connection of its own), one output each."""
    from spur.rpc.proto import spur_pb2 as pb

    found = call_once(
        target, tls, "GetNodes", pb.GetNodesRequest(names=follow.nodes_wanted), pb.GetNodesResponse, 10
    )
    return [_NodeOutput(n.name, f"{n.address}:{n.port}", follow.job_id, label) for n in found.nodes]


def _cancel(follow: Follow, target: str, tls: ClientTLS | None) -> int:
    """SIGINT/SIGTERM: cancel the job and say so, in Slurm's words; srun then exits 1."""
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    job_id = follow.job_id
    if follow.allocated:
        _say(["srun: forcing job termination"])
    else:
        _say([f"srun: Job allocation {job_id} has been revoked"])
    try:
        call_once(target, tls, "CancelJob", pb.CancelJobRequest(job_id=job_id), pb.CancelJobResponse, 10)
    except RpcError as exc:
        _say([f"srun: error: could not cancel job {job_id}: {exc.message}"])
    _say([f"srun: Force Terminated JobId={job_id}"])
    return 1


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr, flush=True)
