"""What a page reads through: the signed-in user's service calls (the CLI's rules) and a few facts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from spur.rpc.proto import spur_pb2 as pb
from spur.ui.queue import QueueJob
from spur.ui.samples import Sample, SampleRing
from spur.ui.sessions import Session

__all__ = ["Caller", "ViewContext"]


class Caller(Protocol):
    """Calls a service method as ``session``'s user: the auth interceptor, then the method (RestError)."""

    async def call(self, session: Session, service: str, method: str, request: Any) -> Any: ...

    async def queue_jobs(self, session: Session, request: pb.GetJobsRequest) -> list[QueueJob]:
        """The jobs ``GetJobs(request)`` would list, as light records, under the same auth check and
        read rules (RestError as :meth:`call`); ``request`` uses only ``include_finished`` and
        ``partitions``."""
        ...

    async def job_counts(self, session: Session, request: pb.GetJobsRequest) -> Counter[tuple[str, str]]:
        """How many of the jobs :meth:`queue_jobs` would return are in each (partition, state)."""
        ...


@dataclass
class ViewContext:
    """One page load: who asks, with which query, through what."""

    caller: Caller
    session: Session
    args: Mapping[str, str]
    cluster_name: str
    now: float
    ring: SampleRing
    sample_now: Callable[[], Awaitable[Sample]]
    _sample: list[Sample] = field(default_factory=list)

    async def current_sample(self) -> Sample:
        """The sample of the minute in progress, taken at the first read (it reads every job, a
        slice at a time)."""
        if not self._sample:
            self._sample.append(await self.sample_now())
        return self._sample[0]

    async def queue_jobs(self, request: pb.GetJobsRequest) -> list[QueueJob]:
        """The jobs of ``GetJobs(request)`` as :class:`QueueJob` records, as the signed-in user."""
        return await self.caller.queue_jobs(self.session, request)

    async def job_counts(self, request: pb.GetJobsRequest) -> Counter[tuple[str, str]]:
        """Jobs of ``GetJobs(request)`` per (partition, state), as the signed-in user."""
        return await self.caller.job_counts(self.session, request)

    async def call(self, method: str, request: Any) -> Any:
        """A ControllerService call as the signed-in user."""
        return await self.caller.call(self.session, "controller", method, request)

    async def acct_call(self, method: str, request: Any) -> Any:
        """An Accounting service call (sshare, sacctmgr show) as the signed-in user."""
        return await self.caller.call(self.session, "accounting", method, request)

    async def service_call(self, service: str, method: str, request: Any) -> Any:
        """A call to another of spurctld's services (``"k8s"``, ``"mesh"``) as the signed-in user;
        RestError (404 when this process does not serve it) as :meth:`call`."""
        return await self.caller.call(self.session, service, method, request)
