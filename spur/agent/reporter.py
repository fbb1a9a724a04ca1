"""Delivery of final job statuses to the controller, retried until acknowledged.

Reports are persisted by the executor (report.json) before they reach the :class:`Reporter`, so a
report survives an agent restart: the executor hands it over again on adoption. The reporter sends
pending reports oldest first; while sends fail it backs off exponentially (capped) and logs one line
per failure. A controller answer that retrying cannot change (the job is unknown to it, the report is
invalid) counts as delivered so that it does not block the queue forever. Reports are keyed by
(job id, step id): a job's own report and its steps' reports are separate deliveries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from spur.rpc.proto import spur_pb2
from spur.rpc.status import RpcError, StatusCode

__all__ = ["Reporter", "report_key"]

log = logging.getLogger("spur.agent.reporter")

_FINAL_CODES = frozenset({StatusCode.NOT_FOUND, StatusCode.INVALID_ARGUMENT})

ReportKey = tuple[int, int | None]


def report_key(report: spur_pb2.JobStatusReport) -> ReportKey:
    """(job_id, step_id or None) of a report."""
    return report.job_id, report.step_id if report.HasField("step_id") else None


class Reporter:
    def __init__(
        self,
        send: Callable[[spur_pb2.JobStatusReport], Awaitable[object]],
        on_ack: Callable[[spur_pb2.JobStatusReport], None],
        *,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self._send = send
        self._on_ack = on_ack
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._pending: dict[ReportKey, spur_pb2.JobStatusReport] = {}
        self._wakeup = trio.Event()

    @property
    def pending(self) -> list[ReportKey]:
        return list(self._pending)

    def submit(self, report: spur_pb2.JobStatusReport) -> None:
        """Queue ``report`` (a newer report for the same job or step replaces a queued one).

        ``on_ack(report)`` is called once the controller has it."""
        self._pending[report_key(report)] = report
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        backoff = self._initial_backoff
        while True:
            if not self._pending:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            key, report = next(iter(self._pending.items()))
            job_id = report.job_id
            try:
                await self._send(report)
            except RpcError as e:
                if e.code in _FINAL_CODES:
                    log.warning("job %d: controller rejected the final status (%s); not retrying", job_id, e)
                else:
                    log.warning(
                        "job %d: reporting final status failed (%s); retry in %.1fs", job_id, e, backoff
                    )
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff)
                    continue
            except OSError as e:
                log.warning("job %d: reporting final status failed (%s); retry in %.1fs", job_id, e, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                continue
            backoff = self._initial_backoff
            if self._pending.get(key) is report:
                del self._pending[key]
            self._on_ack(report)
