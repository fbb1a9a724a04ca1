"""Commands of the replicated state machine: what a Raft log entry carries.

Each command is a small dataclass; ``encode``/``decode`` turn it into the JSON bytes stored in the log.
Every value the state machine needs (times, terms, identities) is inside the command, stamped by the
leader when it proposes, so applying a log is deterministic and replayable.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from typing import Any

import orjson

from spur.core.job import JobSpec, Node, NodeAllocation, Partition, StepSpec
from spur.core.serde import from_plain, to_plain


@dataclass
class ConfigurePartitions:
    """Replace the partition table with the configured one (proposed by a leader on start/reconfigure)."""

    partitions: list[Partition]


@dataclass
class SubmitJob:
    """A new job (or array). ``grant`` is the leader's immediate grant (spur.state.immediate): the
    allocation the job starts on in this same entry if it still fits; empty: it pends. ``term`` is the
    leader's term, recorded as the allocation's term like ``StartJob.term``."""

    spec: JobSpec
    user: str
    uid: int
    gid: int
    group: str
    submit_time: float
    grant: list[NodeAllocation] = field(default_factory=list)
    term: int = 0


@dataclass
class RegisterNode:
    node: Node
    time: float


@dataclass
class UpdateNode:
    """Admin state change: action is DRAIN, RESUME, UNDRAIN or DOWN."""

    names: list[str]
    action: str
    reason: str
    time: float


@dataclass
class NodeLost:
    """The leader saw no heartbeat within the timeout: node DOWN, its running jobs NODE_FAIL."""

    names: list[str]
    reason: str
    time: float


@dataclass
class ForgetNode:
    """Forget a node that is gone for good (e.g. a deleted Kubernetes node): its running jobs end
    NODE_FAIL, then it leaves the inventory. Compare ``RemoveNode`` (admin; refused while jobs run)."""

    name: str
    time: float


@dataclass
class NodeReturned:
    """A node that was DOWN for not responding is talking again: back in service."""

    name: str
    time: float


@dataclass
class StartJob:
    job_id: int
    allocation: list[NodeAllocation]
    start_time: float
    term: int


@dataclass
class JobLaunched:
    job_id: int
    term: int


@dataclass
class LaunchFailed:
    """Agents could not be reached for the launch: requeue the job (it never ran)."""

    job_id: int
    message: str
    time: float


@dataclass
class CancelJob:
    """Cancel a job; an array job id cancels every task unless ``array_task_id`` picks one."""

    job_id: int
    requester_uid: int
    time: float
    array_task_id: int | None = None
    admin: bool = False  # the requester is a verified administrator (spur.auth.admin.is_admin)


@dataclass
class UpdateJob:
    """scontrol update job / hold / release / requeue / suspend / resume (None = leave as is)."""

    job_id: int
    requester_uid: int
    time: float
    array_task_id: int | None = None
    time_limit_secs: int | None = None
    partition: str | None = None
    priority: int | None = None
    nice: int | None = None
    name: str | None = None
    comment: str | None = None
    action: str = ""
    admin: bool = False  # the requester is a verified administrator (spur.auth.admin.is_admin)


@dataclass
class CreateStep:
    job_id: int
    spec: StepSpec
    requester_uid: int
    time: float
    admin: bool = False  # the requester is a verified administrator (spur.auth.admin.is_admin)


@dataclass
class StepExited:
    job_id: int
    step_id: int
    node: str
    exit_code: int
    signal: int
    end_time: float
    cancelled: bool = False
    launch_failed: bool = False


@dataclass
class JobExited:
    """An agent reports the job's processes on ``node`` are gone."""

    job_id: int
    node: str
    exit_code: int
    signal: int
    end_time: float
    timed_out: bool = False
    cancelled: bool = False
    launch_failed: bool = False
    message: str = ""
    out_of_memory: bool = False  # the kernel's OOM killer ended it (Slurm's OUT_OF_MEMORY)


@dataclass
class AnnounceController:
    """Where clients reach controller ``node_id`` (its gRPC address); used for forwarding and status."""

    node_id: int
    address: str


@dataclass
class SetPendingReasons:
    """Scheduler's explanation for each pending job that did not start (squeue's REASON)."""

    reasons: dict[str, str] = field(default_factory=dict)


@dataclass
class RemoveNode:
    """Admin: take nodes out of the inventory (refused while one holds a running job)."""

    names: list[str]
    time: float


@dataclass
class InitClusterId:
    """Name the cluster once: the first leader proposes a random id; later proposals change nothing."""

    cluster_id: str


@dataclass
class Batch:
    """Several commands in one log entry (the leader's proposal batcher), applied in order as if each
    were its own entry; the result is the list of their results (a Rejected one rejects only itself)."""

    commands: list[Any]


COMMANDS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ConfigurePartitions,
        SubmitJob,
        RegisterNode,
        UpdateNode,
        NodeLost,
        NodeReturned,
        ForgetNode,
        StartJob,
        JobLaunched,
        LaunchFailed,
        CancelJob,
        UpdateJob,
        CreateStep,
        StepExited,
        JobExited,
        SetPendingReasons,
        AnnounceController,
        InitClusterId,
        RemoveNode,
    )
}


# The commands a leader applies as their proposer built them, without decoding its own entry (every
# job passes through these, and decoding a submission's spec is most of an entry's decode). The
# state then holds the proposer's objects, so each type is listed only when every place that builds
# one builds it fresh for that proposal, of exactly the types decoding gives, and leaves it alone
# afterwards. The integration suite checks the types on every entry (``ClusterState.verify_proposed``).
APPLIED_AS_PROPOSED: frozenset[type] = frozenset({SubmitJob, JobLaunched, StepExited, JobExited})


def as_proposed(proposed: object) -> Any | None:
    """``proposed`` when the state may apply it in place of decoding its entry: a command, or a Batch
    of commands, of the ``APPLIED_AS_PROPOSED`` types. None otherwise (the entry is decoded)."""
    if type(proposed) in APPLIED_AS_PROPOSED:
        return proposed
    if isinstance(proposed, Batch) and all(type(cmd) in APPLIED_AS_PROPOSED for cmd in proposed.commands):
        return proposed
    return None


def registry() -> dict[str, type]:
    """Every command the log codec knows: the core ones above plus each state domain's."""
    global _REGISTRY
    if _REGISTRY is None:
        from spur.state.domains import DOMAINS

        merged = dict(COMMANDS)
        for domain in DOMAINS:
            for cls in domain.commands:
                if cls.__name__ in merged and merged[cls.__name__] is not cls:
                    raise TypeError(f"state command name {cls.__name__} is declared twice")
                merged[cls.__name__] = cls
        for cls in merged.values():
            _refuse_private_fields(cls)
        _REGISTRY = merged
    return _REGISTRY


_REGISTRY: dict[str, type] | None = None


def _refuse_private_fields(tp: Any, seen: set[type] | None = None) -> None:
    """Raise TypeError if a dataclass reachable from type hint ``tp`` has a field whose name begins
    with an underscore: ``encode``'s writer would leave it out of the log."""
    seen = set() if seen is None else seen
    for arg in typing.get_args(tp):
        _refuse_private_fields(arg, seen)
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or tp in seen:
        return
    seen.add(tp)
    hints = typing.get_type_hints(tp)
    for f in dataclasses.fields(tp):
        if f.name.startswith("_"):
            raise TypeError(
                f"state command data may not have a field named with an underscore: {tp.__name__}.{f.name}"
            )
        _refuse_private_fields(hints[f.name], seen)


def _tagged(cmd: Any) -> dict[str, Any]:
    """``{"type": name, "body": cmd}`` for a registered command (the body still a dataclass)."""
    name = type(cmd).__name__
    if registry().get(name) is not type(cmd):
        raise TypeError(f"not a state command: {name}")
    return {"type": name, "body": cmd}


def _command_of(obj: dict[str, Any]) -> Any:
    cls = registry().get(obj.get("type", ""))
    if cls is None:
        raise ValueError(f"unknown state command {obj.get('type')!r}")
    return from_plain(cls, obj["body"])


# orjson writes the commands' dataclasses itself: their fields in order, enums by value, tuples as
# lists, which is the text ``dumps(to_plain(...))`` gives, in 40% of the time (every entry the
# leader proposes passes here). It leaves out fields whose names begin with an underscore, so a
# command may not have one (``registry`` refuses it). What it refuses, or writes with a null
# anywhere (a None, or a NaN or infinity it would hide), is written the plain way
# (``encode_plainly``). (It would also write an attribute set on an instance beside its fields;
# ``decode`` ignores unknown keys.)
_NATIVE = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def _document(cmd: Any) -> dict[str, Any]:
    """The log's document of a command (or a :class:`Batch` of commands, not nested), its bodies
    still dataclasses."""
    if type(cmd) is Batch:
        if any(type(inner) is Batch for inner in cmd.commands):
            raise TypeError("a Batch cannot contain a Batch")
        return {"type": "Batch", "body": {"commands": [_tagged(inner) for inner in cmd.commands]}}
    return _tagged(cmd)


def encode(cmd: Any) -> bytes:
    """Serialize a command (or a :class:`Batch` of commands, not nested) for the log: the text of
    :func:`encode_plainly`, written by orjson from the dataclasses where it can."""
    return _by_orjson(_document(cmd), _NATIVE) or encode_plainly(cmd)


def encode_plainly(cmd: Any) -> bytes:
    """The log's text of a command by definition: its ``to_plain`` form, written by :func:`dumps`."""
    return dumps(to_plain(_document(cmd)))


def _by_orjson(value: Any, option: int) -> bytes | None:
    """orjson's text of ``value``, or None where orjson refuses it or writes ``null`` anywhere (a
    None, or a NaN or infinity it hides behind one)."""
    try:
        data = orjson.dumps(value, option=option)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    return None if b"null" in data else data


# Dataclasses, datetimes and subclasses of the built-in types, which orjson would write and json
# refuses, go to json, which raises as it always did.
_STRICT = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(plain: Any) -> bytes:
    """Compact JSON of a plain value as ``to_plain`` makes them (dicts, lists, tuples, strings,
    numbers, booleans and None), which ``json.loads`` and ``decode`` read back exactly as they read
    ``json.dumps(plain, separators=(",", ":"))``.

    orjson writes it several times faster, but differs from json in two ways: it refuses some values
    json takes (integers beyond 64 bits, keys that are not strings, lone surrogates, subclasses of the
    built-in types), and it writes a NaN or an infinity as ``null``. So json writes every value orjson
    refused, and every value whose orjson text holds ``null`` anywhere: a command's plain form holds no
    None in the usual case, and a NaN can only hide behind a ``null``."""
    return _by_orjson(plain, _STRICT) or json.dumps(plain, separators=(",", ":")).encode()


def decode(data: bytes) -> Any:
    """Inverse of ``encode``; raises ValueError on an unknown command type."""
    try:
        obj = orjson.loads(data)  # ~4x faster than json; every applied entry passes here
    except orjson.JSONDecodeError:
        obj = json.loads(data)  # what orjson refuses and json writes (NaN, Infinity)
    if obj.get("type") == "Batch":
        return Batch([_command_of(inner) for inner in obj["body"]["commands"]])
    return _command_of(obj)
