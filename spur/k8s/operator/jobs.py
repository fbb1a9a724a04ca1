"""The job controller: SpurJob objects -> Spur jobs, and the jobs' state back into the objects.

For each SpurJob (list + watch, and a full pass every ``resync`` seconds):

1. Not being deleted and without our finalizer (``spur.amd.com/cancel-job``): add it first, so a
   job is never submitted for an object that could vanish without cancelling it.
2. No ``status.jobId``: look for a job carrying the object's submit tag (its uid, in the comment) and
   adopt it; only when there is none, submit ``spec.script`` (:func:`spurjobs.build_spec`) as the
   user the identity rules give (:func:`spurjobs.identity_of`). A script or option sbatch would
   refuse, or a submission the controller refuses, ends as ``status.state: FAILED`` with the message.
3. Mirror the job into ``status`` (state, jobId, nodes, message, startTime, endTime, exitCode) through
   the status subresource whenever something changed.
4. Being deleted: cancel the job if it has not ended, delete its pods and Service (label
   ``spur.amd.com/job-id``), then remove the finalizer.

Transport errors to the controller are retried by the link; a pass that still fails is logged and
the object is handled again at the next event or resync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from spur.k8s.operator import spurjobs as sj
from spur.k8s.operator.kube import KubeClient, KubeError, WatchExpired, path_of, watch_from
from spur.k8s.operator.link import ControllerLink
from spur.k8s.operator.pods import JOB_ID_LABEL
from spur.rpc.convert import spec_to_proto
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

__all__ = ["JobController"]

log = logging.getLogger("spur.k8s.operator.jobs")

CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]
_ACTIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "")


class JobController:
    def __init__(
        self,
        kube: KubeClient,
        link: ControllerLink,
        *,
        namespace: str | None,
        default_image: str,
        default_uid: int,
        submit_metadata: Callable[[sj.SpurJobIdentity], dict[str, str]],
        resync: float = 10.0,
        poll: float = 2.0,
        grace_secs: int = 30,
    ) -> None:
        self.kube = kube
        self.link = link
        self.namespace = namespace
        self.default_image = default_image
        self.default_uid = default_uid
        self.submit_metadata = submit_metadata
        self.resync = resync
        self.poll = poll
        self.grace_secs = grace_secs
        self.objects: dict[str, dict[str, Any]] = {}  # uid -> object
        self.submitted = 0
        self.synced = trio.Event()
        self._wake = trio.Event()

    def _path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        return path_of(
            group=sj.GROUP, version=sj.VERSION, plural=sj.PLURAL, namespace=namespace, name=name, sub=sub
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch, name="spurjob-watch")
            task_status.started()
            while True:
                with trio.move_on_after(self.poll):
                    await self._wake.wait()
                self._wake = trio.Event()
                await self.reconcile_all()

    async def _watch(self) -> None:
        path = self._path(self.namespace)
        while True:
            try:
                listed = await self.kube.list(path)
                self.objects = {o["metadata"]["uid"]: o for o in listed.get("items") or []}
                self.synced.set()
                self._wake.set()
                version = (listed.get("metadata") or {}).get("resourceVersion", "0")
                with trio.move_on_after(self.resync):
                    async for kind, obj in watch_from(self.kube, path, version):
                        uid = obj["metadata"]["uid"]
                        if kind == "DELETED":
                            self.objects.pop(uid, None)
                        else:
                            self.objects[uid] = obj
                        self._wake.set()
            except WatchExpired:
                continue
            except KubeError as exc:
                log.warning("SpurJob watch failed (%s); listing again", exc)
                await trio.sleep(1.0)

    async def reconcile_all(self) -> None:
        objects = list(self.objects.values())
        if not objects:
            return
        try:
            ids = [
                int((o.get("status") or {}).get("jobId") or 0)
                for o in objects
                if (o.get("status") or {}).get("state", "") in _ACTIVE
                or (o.get("metadata") or {}).get("deletionTimestamp")
            ]
            ids = [i for i in ids if i]
            jobs: dict[int, Any] = {}
            if ids:
                answer = await self.link.call(
                    CONTROLLER, "GetJobs", pb.GetJobsRequest(job_ids=ids, include_finished=True)
                )
                jobs = {j.job_id: j for j in answer.jobs}
        except RpcError as exc:
            log.warning("reading jobs from the controller failed (%s); trying again", exc)
            return
        for obj in objects:
            try:
                await self.reconcile(obj, jobs)
            except (RpcError, KubeError) as exc:
                log.warning("%s: %s; trying again", sj.describe(obj), exc)

    async def reconcile(self, obj: dict[str, Any], jobs: dict[int, Any]) -> None:
        meta = obj["metadata"]
        status = obj.get("status") or {}
        if meta.get("deletionTimestamp"):
            await self._finalize(obj, jobs)
            return
        finalizers = sj.with_finalizer(obj)
        if finalizers is not None:
            updated = await self.kube.merge_patch(
                self._path(meta["namespace"], meta["name"]),
                {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}},
            )
            obj = self.objects[meta["uid"]] = updated
            meta = obj["metadata"]
        job_id = int(status.get("jobId") or 0)
        if not job_id:
            if status.get("state") == "FAILED":
                return  # could not be submitted; the message says why
            job = await self._submit(obj)
            if job is None:
                return
        else:
            if status.get("state", "") not in _ACTIVE:
                return
            job = jobs.get(job_id)
            if job is None:
                return
        desired = sj.status_from_job(job, generation=meta.get("generation"))
        await self._write_status(obj, desired)

    async def _write_status(self, obj: dict[str, Any], desired: dict[str, Any]) -> None:
        changes = sj.status_changes(obj.get("status"), desired)
        if not changes:
            return
        meta = obj["metadata"]
        updated = await self.kube.merge_patch(
            self._path(meta["namespace"], meta["name"], "status"), {"status": changes}
        )
        if meta["uid"] in self.objects:
            self.objects[meta["uid"]] = updated
        if "state" in changes:
            log.info("%s: job %s %s", sj.describe(obj), desired.get("jobId", "-"), desired["state"])

    async def _submit(self, obj: dict[str, Any]) -> Any | None:
        meta = obj["metadata"]
        answer = await self.link.call(CONTROLLER, "GetJobs", pb.GetJobsRequest(include_finished=True))
        existing = sj.find_submitted(answer.jobs, meta["uid"])
        if existing is not None:
            log.info("%s: adopting job %d submitted earlier", sj.describe(obj), existing.job_id)
            return existing
        try:
            who = sj.identity_of(obj, self.default_uid)
            spec = sj.build_spec(obj, default_image=self.default_image)
        except sj.SpurJobError as exc:
            await self._write_status(obj, sj.error_status(str(exc), generation=meta.get("generation")))
            return None
        try:
            response = await self.link.call(
                CONTROLLER,
                "SubmitJob",
                pb.SubmitJobRequest(spec=spec_to_proto(spec)),
                metadata=self.submit_metadata(who),
                attempts=1,  # a retry could submit twice; the next pass looks for the tag first
            )
        except RpcError as exc:
            if exc.code in (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED):
                raise
            await self._write_status(
                obj, sj.error_status(f"submission refused: {exc.message}", generation=meta.get("generation"))
            )
            return None
        self.submitted += 1
        log.info("%s: submitted as job %d (user %s)", sj.describe(obj), response.job_id, who.user)
        answer = await self.link.call(
            CONTROLLER, "GetJobs", pb.GetJobsRequest(job_ids=[response.job_id], include_finished=True)
        )
        return next((j for j in answer.jobs if j.job_id == response.job_id), None)

    def _owner_metadata(self, obj: dict[str, Any]) -> dict[str, str] | None:
        """The job owner's call headers (its token with a key), or None when the object names none."""
        try:
            return self.submit_metadata(sj.identity_of(obj, self.default_uid))
        except sj.SpurJobError:
            return None

    async def _finalize(self, obj: dict[str, Any], jobs: dict[int, Any]) -> None:
        meta = obj["metadata"]
        remaining = sj.without_finalizer(obj)
        if remaining is None:
            return
        job_id = int((obj.get("status") or {}).get("jobId") or 0)
        if not job_id:
            answer = await self.link.call(CONTROLLER, "GetJobs", pb.GetJobsRequest(include_finished=True))
            found = sj.find_submitted(answer.jobs, meta["uid"])
            job_id = found.job_id if found is not None else 0
            if found is not None:
                jobs[job_id] = found
        if job_id:
            job = jobs.get(job_id)
            if job is not None and job.state in _ACTIVE:
                try:
                    await self.link.call(  # as the job's owner: a daemon credential cannot cancel
                        CONTROLLER,
                        "CancelJob",
                        pb.CancelJobRequest(job_id=job_id),
                        metadata=self._owner_metadata(obj),
                    )
                    log.info("%s deleted: job %d cancelled", sj.describe(obj), job_id)
                except RpcError as exc:
                    if exc.code in (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED):
                        raise
                    log.info("%s deleted: cancelling job %d: %s", sj.describe(obj), job_id, exc.message)
            await self._delete_pods(meta["namespace"], job_id)
        await self.kube.merge_patch(
            self._path(meta["namespace"], meta["name"]),
            {"metadata": {"finalizers": remaining or None, "resourceVersion": meta["resourceVersion"]}},
        )

    async def _delete_pods(self, namespace: str, job_id: int) -> None:
        selector = f"{JOB_ID_LABEL}={job_id}"
        for plural in ("pods", "services"):
            listed = await self.kube.list(path_of(plural=plural, namespace=namespace), labelSelector=selector)
            for item in listed.get("items") or []:
                await self.kube.delete(
                    path_of(plural=plural, namespace=namespace, name=item["metadata"]["name"]),
                    grace_seconds=self.grace_secs if plural == "pods" else None,
                )
