"""The virtual agent: spurctld's Agent service for every Kubernetes node, served by the operator.

- ``LaunchJob`` (sent for a batch job to its first node) creates the job's pods, one per node of the
  allocation (:func:`spur.k8s.operator.pods.render_pods`), and for a multi-node job the headless
  rendezvous Service. A pod that already exists counts as created, so a repeated launch is safe
  (``already_running``). A Kubernetes refusal (e.g. a quota) fails the launch with its message
  (FAILED_PRECONDITION); an unreachable API server is UNAVAILABLE (the controller retries).
- ``SignalJob`` with signal 0/SIGTERM/SIGKILL (cancel, requeue) deletes the job's pods with the
  grace period the controller sent and reports the job cancelled; a job with no pods is NOT_FOUND.
  Other signals and actions have no Kubernetes equivalent: FAILED_PRECONDITION, saying so.
- Job steps and output streaming are not served on Kubernetes nodes (UNIMPLEMENTED, saying so):
  ``LaunchStep`` is the one Agent call a user's process makes, and here it runs nothing whatever
  record it carries. ``LaunchJob`` and ``SignalJob`` are the controller's (the auth policy admits only
  a daemon credential to them), so their job record is the controller's.

A pod watcher (list + watch of the pods labelled ``app.kubernetes.io/managed-by=spur-k8s-operator``)
keeps every job's pods; when :func:`spur.k8s.operator.pods.job_outcome` says a job ended, its final
status goes to the controller through a :class:`spur.agent.reporter.Reporter` (retried until
acknowledged) as the report of the job's first node. Everything is rebuilt from the pods after a
restart (their labels carry job id, rank and node), so the operator keeps no state of its own.
"""

from __future__ import annotations

import logging
import signal as _signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from spur.agent.reporter import Reporter
from spur.k8s.operator.kube import KubeClient, KubeError, KubeUnavailable, WatchExpired, path_of, watch_from
from spur.k8s.operator.pods import (
    CLUSTER_ANNOTATION,
    JOB_ID_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODE_LABEL,
    RANK_LABEL,
    job_namespace,
    job_outcome,
    render_pods,
    render_service,
    service_name,
)
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["VirtualAgent"]

log = logging.getLogger("spur.k8s.operator.agent")

_CANCEL_SIGNALS = frozenset({0, int(_signal.SIGTERM), int(_signal.SIGKILL)})


class VirtualAgent:
    """Agent servicer + pod watcher (module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        send_report: Callable[[pb.JobStatusReport], Any],
        default_namespace: str,
        default_image: str,
        watch_namespace: str | None,
        gpu_resources: dict[str, str],
        cluster_name: Callable[[], str],
        resync: float = 30.0,
    ) -> None:
        self.kube = kube
        self.default_namespace = default_namespace
        self.default_image = default_image
        self.watch_namespace = watch_namespace
        self.gpu_resources = gpu_resources
        self.cluster_name = cluster_name
        self.resync = resync
        self.pods: dict[int, dict[str, dict[str, Any]]] = {}  # job id -> pod name -> pod
        self.ended: set[int] = set()  # outcome decided (reported or queued)
        self.unacked: set[int] = set()
        self.synced = trio.Event()
        self.reporter = Reporter(send_report, self._acked)
        self.launches = 0

    # ------------------------------------------------------------------ what the node watcher asks

    def running_on(self, node: str) -> list[int]:
        """Jobs whose first pod (rank 0) runs on ``node`` and have not ended."""
        out = []
        for job_id, pods in self.pods.items():
            if job_id in self.ended:
                continue
            for pod in pods.values():
                labels = pod["metadata"].get("labels") or {}
                if labels.get(RANK_LABEL) == "0" and labels.get(NODE_LABEL) == node:
                    out.append(job_id)
        return sorted(out)

    def unreported_on(self, node: str) -> list[int]:
        return sorted(j for j in self.unacked if self._first_node(j) == node)

    def _first_node(self, job_id: int) -> str | None:
        for pod in self.pods.get(job_id, {}).values():
            labels = pod["metadata"].get("labels") or {}
            if labels.get(RANK_LABEL) == "0":
                return labels.get(NODE_LABEL)
        return None

    # ------------------------------------------------------------------ Agent service

    async def LaunchJob(self, request: pb.LaunchJobRequest, context: CallContext) -> pb.LaunchJobResponse:
        job = request.job
        if not job.allocation:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"job {job.job_id} has no allocation")
        if not request.batch:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                "interactive jobs (srun/salloc) cannot run on Kubernetes nodes: submit a batch script",
            )
        try:
            objects = render_pods(
                job,
                default_namespace=self.default_namespace,
                default_image=self.default_image,
                cluster_name=self.cluster_name(),
                cluster_id=request.cluster_id,
                gpu_resources=self.gpu_resources,
            )
        except ValueError as exc:
            raise RpcError(StatusCode.INVALID_ARGUMENT, str(exc)) from None
        namespace = job_namespace(job, self.default_namespace)
        existed = 0
        try:
            if len(objects) > 1:
                await self._create(
                    path_of(plural="services", namespace=namespace),
                    render_service(job, default_namespace=self.default_namespace),
                )
            for pod in objects:
                if not await self._create(path_of(plural="pods", namespace=namespace), pod):
                    existed += 1
                self.pods.setdefault(job.job_id, {}).setdefault(pod["metadata"]["name"], pod)
        except KubeUnavailable as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"Kubernetes API unreachable: {exc.message}") from None
        except KubeError as exc:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, f"Kubernetes refused the pods of job {job.job_id}: {exc}"
            ) from None
        self.launches += 1
        log.info(
            "job %d: %d pod(s) in namespace %s on %s",
            job.job_id,
            len(objects),
            namespace,
            ",".join(a.node for a in job.allocation),
        )
        return pb.LaunchJobResponse(already_running=existed == len(objects))

    async def _create(self, path: str, obj: dict[str, Any]) -> bool:
        """Create; False when it already existed."""
        try:
            await self.kube.create(path, obj)
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def SignalJob(self, request: pb.SignalJobRequest, context: CallContext) -> pb.Empty:
        pods = self.pods.get(request.job_id)
        log.info(
            "job %d: signal %d%s from the controller (%d pod(s) here)",
            request.job_id,
            request.signal,
            f" ({request.action})" if request.action else "",
            len(pods or {}),
        )
        if not pods:
            raise RpcError(StatusCode.NOT_FOUND, f"job {request.job_id} has no pods here")
        if request.action == "set_time_limit":
            # A running pod's activeDeadlineSeconds can only be shortened; the new limit is not applied.
            log.warning(
                "job %d: time limit changed to %ds; its running pods keep the limit they started with",
                request.job_id,
                request.time_limit_secs,
            )
            return pb.Empty()
        if (
            request.action not in ("", "requeue")
            or request.signal not in _CANCEL_SIGNALS
            or request.HasField("step_id")
        ):
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                "jobs on Kubernetes nodes can only be cancelled or requeued (their pods are deleted)",
            )
        grace = int(request.grace_secs) if request.grace_secs > 0 else None
        if request.job_id in self.ended:
            return pb.Empty()
        # Who reports, read before the deletion: the pod watch forgets deleted pods meanwhile.
        first, cluster_id = self._first_node(request.job_id), self._cluster_of(request.job_id)
        self.ended.add(request.job_id)
        try:
            await self.delete_job_objects(request.job_id, grace)
        except KubeError as exc:
            self.ended.discard(request.job_id)
            raise RpcError(
                StatusCode.UNAVAILABLE, f"deleting the pods of job {request.job_id}: {exc}"
            ) from None
        self._finish(
            request.job_id,
            pb.JobStatusReport(
                job_id=request.job_id,
                node=first or "",
                exit_code=0,
                signal=int(_signal.SIGKILL)
                if request.signal == int(_signal.SIGKILL)
                else int(_signal.SIGTERM),
                cancelled=True,
                end_time=time.time(),
                cluster_id=cluster_id,
            ),
        )
        return pb.Empty()

    async def LaunchStep(self, request: pb.LaunchStepRequest, context: CallContext) -> pb.LaunchJobResponse:
        raise RpcError(
            StatusCode.UNIMPLEMENTED, "job steps (srun inside a job) are not run on Kubernetes nodes"
        )

    async def StreamOutput(
        self, request: pb.StreamOutputRequest, context: CallContext
    ) -> AsyncIterator[pb.OutputChunk]:
        raise RpcError(
            StatusCode.UNIMPLEMENTED,
            "output of jobs on Kubernetes nodes is in their pods' logs (kubectl logs)",
        )
        yield  # pragma: no cover - makes this an async generator

    async def Status(self, request: pb.Empty, context: CallContext) -> pb.AgentStatus:
        jobs = [pb.AgentJob(job_id=j, finished=j in self.ended) for j in sorted(self.pods)]
        return pb.AgentStatus(name=MANAGED_BY, jobs=jobs)

    # ------------------------------------------------------------------ pods

    async def delete_job_objects(self, job_id: int, grace: int | None) -> None:
        """Delete the job's pods (with ``grace`` seconds) and its Service; raises KubeError."""
        pods = dict(self.pods.get(job_id, {}))
        namespaces = set()
        for name, pod in pods.items():
            namespace = pod["metadata"].get("namespace") or self.default_namespace
            namespaces.add(namespace)
            await self.kube.delete(
                path_of(plural="pods", namespace=namespace, name=name), grace_seconds=grace
            )
        for namespace in namespaces:
            await self.kube.delete(path_of(plural="services", namespace=namespace, name=service_name(job_id)))

    def _cluster_of(self, job_id: int) -> str:
        for pod in self.pods.get(job_id, {}).values():
            return (pod["metadata"].get("annotations") or {}).get(CLUSTER_ANNOTATION, "")
        return ""

    def _finish(self, job_id: int, report: pb.JobStatusReport) -> None:
        self.ended.add(job_id)
        self.unacked.add(job_id)
        self.reporter.submit(report)

    def _acked(self, report: pb.JobStatusReport) -> None:
        self.unacked.discard(report.job_id)

    def _evaluate(self, job_id: int) -> None:
        if job_id in self.ended:
            return
        pods = self.pods.get(job_id) or {}
        if not pods:
            return
        expected = 1 + max(
            int((p["metadata"].get("labels") or {}).get(RANK_LABEL, "0")) for p in pods.values()
        )
        outcome = job_outcome(pods.values(), expected)
        if outcome is None:
            return
        log.info("job %d ended: %s", job_id, outcome.message or "all pods succeeded")
        self._finish(
            job_id,
            pb.JobStatusReport(
                job_id=job_id,
                node=self._first_node(job_id) or "",
                exit_code=outcome.exit_code,
                launch_failed=outcome.launch_failed,
                message=outcome.message,
                out_of_memory=outcome.out_of_memory,
                timed_out=outcome.timed_out,
                end_time=time.time(),
                cluster_id=self._cluster_of(job_id),
            ),
        )

    def _track(self, kind: str, pod: dict[str, Any]) -> None:
        labels = pod["metadata"].get("labels") or {}
        raw = labels.get(JOB_ID_LABEL, "")
        if not raw.isdigit():
            return
        job_id = int(raw)
        name = pod["metadata"]["name"]
        if kind == "DELETED":
            pods = self.pods.get(job_id)
            if pods is not None:
                pods.pop(name, None)
                if not pods:
                    self.pods.pop(job_id, None)
                    self.ended.discard(job_id)
            return
        self.pods.setdefault(job_id, {})[name] = pod
        self._evaluate(job_id)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The reporter and the pod watcher, until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.reporter.run)
            task_status.started()
            await self._watch_pods()

    async def _watch_pods(self) -> None:
        path = path_of(plural="pods", namespace=self.watch_namespace)
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        backoff = 0.5
        while True:
            try:
                listed = await self.kube.list(path, labelSelector=selector)
                seen: dict[int, dict[str, dict[str, Any]]] = {}
                for pod in listed.get("items") or []:
                    raw = (pod["metadata"].get("labels") or {}).get(JOB_ID_LABEL, "")
                    if raw.isdigit():
                        seen.setdefault(int(raw), {})[pod["metadata"]["name"]] = pod
                # Pods created by a launch in flight are kept; everything else is what the API says.
                for job_id in list(self.pods):
                    if job_id not in seen:
                        self.pods.pop(job_id)
                        self.ended.discard(job_id)
                self.pods.update(seen)
                for job_id in list(self.pods):
                    self._evaluate(job_id)
                self.synced.set()
                version = (listed.get("metadata") or {}).get("resourceVersion", "0")
                backoff = 0.5
                with trio.move_on_after(self.resync):
                    async for kind, pod in watch_from(self.kube, path, version, labelSelector=selector):
                        self._track(kind, pod)
            except WatchExpired:
                continue
            except KubeError as exc:
                log.warning("pod watch failed (%s); listing again in %.1fs", exc, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
