"""SpurJob objects -> Spur jobs and back (pure: no I/O).

Identity rules (who a SpurJob's job runs as):

- the Spur user is the annotation ``spur.amd.com/user`` when an admission rule (or the submitter's
  tooling) set it, otherwise the object's namespace name: namespace ``team-a`` submits as user
  ``team-a``. The numeric uid is the annotation ``spur.amd.com/uid``, otherwise the operator's
  ``--default-uid``.
- the account is ``spec.account``, else the script's ``#SBATCH --account``, else -- for a namespace
  made by ``--enable-quota`` (``spur-acct-<account>``) -- that account; otherwise none (the user's
  default association applies).

Idempotent submission: the job's comment is ``spurjob-uid=<metadata.uid>`` (an ``#SBATCH --comment``
is replaced), so before submitting the job controller looks for a job that carries it and adopts that
one instead (a crash between the submit and the status write submits nothing twice).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spur.core.job import JobSpec

if TYPE_CHECKING:
    from spur.rpc.proto import spur_pb2 as pb

__all__ = [
    "FINALIZER",
    "GROUP",
    "VERSION",
    "PLURAL",
    "SpurJobError",
    "SpurJobIdentity",
    "account_namespace",
    "build_spec",
    "find_submitted",
    "identity_of",
    "status_from_job",
    "status_changes",
    "submit_tag",
]

GROUP = "spur.amd.com"
VERSION = "v1alpha1"
PLURAL = "spurjobs"
FINALIZER = "spur.amd.com/cancel-job"
USER_ANNOTATION = "spur.amd.com/user"
UID_ANNOTATION = "spur.amd.com/uid"
ACCOUNT_NAMESPACE_PREFIX = "spur-acct-"
TAG_PREFIX = "spurjob-uid="

#: Environment the virtual agent reads back from a launched job (where its pods go).
ENV_NAMESPACE = "SPUR_K8S_NAMESPACE"
ENV_IMAGE = "SPUR_K8S_IMAGE"
ENV_SPURJOB = "SPUR_K8S_SPURJOB"


class SpurJobError(ValueError):
    """The SpurJob cannot become a job; the message is what its ``status.message`` says."""


@dataclass(frozen=True)
class SpurJobIdentity:
    user: str
    uid: int


def submit_tag(uid: str) -> str:
    """The comment that marks the job submitted for the SpurJob with ``metadata.uid`` ``uid``."""
    return f"{TAG_PREFIX}{uid}"


def account_namespace(account: str) -> str:
    """The namespace ``--enable-quota`` makes for ``account`` (a DNS label: lower case, ``-``)."""
    label = "".join(ch if ch.isalnum() else "-" for ch in account.lower()).strip("-")
    return f"{ACCOUNT_NAMESPACE_PREFIX}{label}"[:63].rstrip("-")


def identity_of(obj: Mapping[str, Any], default_uid: int) -> SpurJobIdentity:
    """The user a SpurJob runs as (module docstring). Raises SpurJobError for a bad uid annotation."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    user = annotations.get(USER_ANNOTATION) or meta.get("namespace") or "default"
    raw_uid = annotations.get(UID_ANNOTATION)
    if raw_uid is None:
        return SpurJobIdentity(user, default_uid)
    if not str(raw_uid).isdigit():
        raise SpurJobError(f"annotation {UID_ANNOTATION} must be a number, not {raw_uid!r}")
    return SpurJobIdentity(user, int(raw_uid))


def build_spec(obj: Mapping[str, Any], *, default_image: str) -> JobSpec:
    """The Spur job spec of a SpurJob: ``spec.script`` with its ``#SBATCH`` lines honoured as sbatch
    does, then ``spec.partition``/``account``/``qos``/``timeLimit`` over them, ``spec.env`` in the
    environment, and the submit tag as the comment. Raises SpurJobError with sbatch's message for a
    script or option sbatch would refuse."""
    from spur.core.job_options import (
        JobOptionError,
        build_job_spec,
        merge_options,
        parse_script_options,
    )
    from spur.core.script import ScriptError, parse_sbatch_directives, validate_script

    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    script = spec.get("script")
    if not isinstance(script, str) or not script.strip():
        raise SpurJobError("spec.script is required")
    overrides: list[str] = []
    for key, option in (
        ("partition", "--partition"),
        ("account", "--account"),
        ("qos", "--qos"),
        ("timeLimit", "--time"),
    ):
        value = spec.get(key)
        if value:
            overrides.append(f"{option}={value}")
    environ = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    for item in spec.get("env") or []:
        if isinstance(item, Mapping) and item.get("name"):
            environ[str(item["name"])] = str(item.get("value", ""))
    try:
        validate_script(script)
        directives = parse_script_options(parse_sbatch_directives(script), command="sbatch")
        extra = parse_script_options(overrides, command="sbatch")
        opts = merge_options(directives, extra)
        job = build_job_spec(opts, script=script, argv=[], cwd="/", environ=environ, script_path=None)
    except (JobOptionError, ScriptError, ValueError) as exc:
        text = str(exc)
        raise SpurJobError(text.removeprefix("sbatch: error: ")) from None
    namespace = meta.get("namespace") or "default"
    if not job.account and namespace.startswith(ACCOUNT_NAMESPACE_PREFIX):
        job.account = namespace[len(ACCOUNT_NAMESPACE_PREFIX) :]
    if not opts.job_name:
        job.name = meta.get("name") or job.name
    job.comment = submit_tag(meta.get("uid", ""))
    job.environment[ENV_NAMESPACE] = namespace
    job.environment[ENV_IMAGE] = spec.get("image") or default_image
    job.environment[ENV_SPURJOB] = meta.get("name", "")
    job.command = f"spurjob/{namespace}/{meta.get('name', '')}"
    return job


def find_submitted(jobs: Iterable[Any], uid: str) -> Any | None:
    """The job (``spur_pb2.JobInfo``) submitted for SpurJob ``uid``, the newest if several."""
    tag = submit_tag(uid)
    found = [j for j in jobs if j.spec.comment == tag]
    return max(found, key=lambda j: j.job_id) if found else None


def _stamp(unix: float) -> str | None:
    if not unix:
        return None
    return _dt.datetime.fromtimestamp(unix, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_from_job(job: pb.JobInfo, *, generation: int | None = None) -> dict[str, Any]:
    """The SpurJob ``status`` that mirrors ``job`` (a ``spur_pb2.JobInfo``)."""
    status: dict[str, Any] = {"state": job.state, "jobId": int(job.job_id)}
    if job.nodelist:
        status["nodes"] = job.nodelist
    message = job.reason if job.reason and job.reason != "None" else ""
    status["message"] = message
    if (start := _stamp(job.start_time)) is not None:
        status["startTime"] = start
    if (end := _stamp(job.end_time)) is not None:
        status["endTime"] = end
    if job.state not in ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING"):
        status["exitCode"] = int(job.exit_code)
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def status_changes(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``desired`` whose values differ from ``current`` (empty: nothing to write)."""
    current = current or {}
    return {k: v for k, v in desired.items() if current.get(k) != v}


def error_status(message: str, *, generation: int | None = None) -> dict[str, Any]:
    """The status of a SpurJob that could not be submitted."""
    status: dict[str, Any] = {"state": "FAILED", "message": message}
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def with_finalizer(obj: Mapping[str, Any]) -> list[str] | None:
    """The finalizers list with ours added, or None when it is already there."""
    finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
    if FINALIZER in finalizers:
        return None
    return [*finalizers, FINALIZER]


def without_finalizer(obj: Mapping[str, Any]) -> list[str] | None:
    """The finalizers list with ours removed, or None when it is not there."""
    finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    return [f for f in finalizers if f != FINALIZER]


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"spurjob {meta.get('namespace', '')}/{meta.get('name', '')}"
