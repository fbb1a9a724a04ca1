"""What srun and salloc share when they follow a job without an event loop (:mod:`spur.rpc.blocking`):
submitting with Slurm's back-off, and one-off calls on a connection of their own while the first
connection carries the job's WatchJob stream."""

from __future__ import annotations

from spur.cli.client import CliError, call_metadata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spur.rpc.blocking import BlockingChannel, M, Message, ResponseType
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.tls import ClientTLS

CONTROLLER = "/spur.v1.Controller/"


def submit(ctl: BlockingChannel, request: pb.SubmitJobRequest, prog: str, failure: str) -> int:
    """SubmitJob, backing off while the controller refuses for being full; the job id. A refusal is a
    CliError: ``<prog>: error: <failure><reason>`` (Slurm's words, :func:`spur.cli.client.submit_failure`)."""
    from spur.cli.busy import Busy, retry_while_busy
    from spur.cli.client import submit_failure
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError, StatusCode

    def attempt() -> int:
        try:
            return ctl.unary(CONTROLLER + "SubmitJob", request, pb.SubmitJobResponse, timeout=30).job_id
        except RpcError as exc:
            if exc.code is StatusCode.RESOURCE_EXHAUSTED:
                raise Busy(exc.message) from None
            raise

    try:
        return retry_while_busy(attempt, prog)
    except (Busy, RpcError) as exc:
        raise CliError(submit_failure(prog, failure, exc.message)) from None


def call_once(
    target: str,
    tls: ClientTLS | None,
    method: str,
    request: Message,
    response_type: ResponseType[M],
    timeout: float,
) -> M:
    """One Controller call (``method``: its name) on a connection of its own, with the current
    credential; RpcError as the call ends."""
    from spur.rpc.blocking import BlockingChannel

    with BlockingChannel(target, metadata=call_metadata(), tls=tls) as ch:
        return ch.unary(CONTROLLER + method, request, response_type, timeout=timeout)
