"""Conversion between the domain dataclasses (:mod:`spur.core.job`) and the wire (protobuf) messages.

Part of the wire layer, so clients (the CLI, the REST adapter, the Kubernetes operator) convert
without importing :mod:`spur.controller`. Pure: no I/O; ``job_to_proto`` imports the hostlist and
dependency-display helpers only when called."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, TypeVar

from google.protobuf.message import Message

from spur.core.hostlist import compress
from spur.core.job import GpuDevice, Job, JobSpec, Node, NodeAllocation, Partition, Step, StepSpec
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.protowire import varint

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")
M = TypeVar("M", bound=Message)


def _build(cls: type[D], values: Mapping[str, object]) -> D:
    """``cls`` from field values read by reflection (their types are the message's, checked by the
    tests that round-trip every field)."""
    return cls(**values)


def _message(cls: type[M], values: Mapping[str, object]) -> M:
    """The message ``cls`` with the given fields set (the constructor checks names and types)."""
    return cls(**values)


def _copy_to_proto(obj: DataclassInstance, msg: M) -> M:
    """Copy a dataclass whose fields mirror the message's (scalars, lists, str->str maps)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, list):
            getattr(msg, f.name).extend(value)
        elif isinstance(value, dict):
            getattr(msg, f.name).update(value)
        else:
            setattr(msg, f.name, value)
    return msg


_SCALAR, _LIST, _MAP = 0, 1, 2


def _kind_of(msg: Message, name: str) -> int:
    """Whether the message's field ``name`` is a scalar, a repeated field or a map."""
    fd = msg.DESCRIPTOR.fields_by_name[name]
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        return _MAP
    return _LIST if fd.is_repeated else _SCALAR


_READ_PLANS: dict[tuple[type, object], tuple[dict[str, int], tuple[tuple[str, int], ...]]] = {}


def _read_plan(cls: type[DataclassInstance], msg: Message) -> tuple[dict[str, int], tuple[tuple[str, int], ...]]:
    """(kind by dataclass field name, the fields to read even when unset), computed once per (class,
    message type): a field left unset on the wire may be left to the dataclass's default only where
    that default equals the message's zero value."""
    key = (cls, msg.DESCRIPTOR)
    plan = _READ_PLANS.get(key)
    if plan is None:
        kinds = {f.name: _kind_of(msg, f.name) for f in fields(cls)}
        blank = type(msg)()
        always = []
        for f in fields(cls):
            if f.default is not MISSING:
                default: object = f.default
            elif f.default_factory is not MISSING:
                default = f.default_factory()
            else:
                always.append((f.name, kinds[f.name]))
                continue
            if _as_value(getattr(blank, f.name), kinds[f.name]) != default:
                always.append((f.name, kinds[f.name]))
        plan = _READ_PLANS[key] = (kinds, tuple(always))
    return plan


def _as_value(value: object, kind: int) -> object:
    if kind == _LIST:
        return list(value)  # type: ignore[call-overload]
    if kind == _MAP:
        return dict(value)  # type: ignore[call-overload]
    return value


def _values_from_proto(cls: type[DataclassInstance], msg: Message) -> dict[str, object]:
    """The dataclass's field values read from ``msg``: scalars as they are, repeated fields as lists,
    maps as dicts. Only the fields set on the wire are read (``ListFields``), and those whose
    dataclass default differs from the wire's zero value: the rest keep their defaults, which are the
    same values (every submission passes here, and a job spec has dozens of fields, most unset)."""
    kinds, always = _read_plan(cls, msg)
    values: dict[str, object] = {}
    for fd, value in msg.ListFields():
        kind = kinds.get(fd.name)
        if kind is not None:
            values[fd.name] = _as_value(value, kind)
    for name, kind in always:
        if name not in values:
            values[name] = _as_value(getattr(msg, name), kind)
    return values


_SPEC_FIELDS = tuple(f.name for f in fields(JobSpec))


def spec_to_proto(spec: JobSpec, *, include_script: bool = True) -> pb.JobSpec:
    """The wire JobSpec; without ``include_script`` the script and environment are left out.
    Only set (non-default) fields are passed: the message constructor is much faster than setattr."""
    kwargs = {name: value for name in _SPEC_FIELDS if (value := getattr(spec, name))}
    if not include_script:
        kwargs.pop("script", None)
        kwargs.pop("environment", None)
    return pb.JobSpec(**kwargs)


def spec_from_proto(msg: pb.JobSpec) -> JobSpec:
    """Build a JobSpec, applying the wire defaults (0 nodes/cpus-per-task mean 1)."""
    values = _values_from_proto(JobSpec, msg)
    values["num_nodes"] = values["num_nodes"] or 1
    values["cpus_per_task"] = values["cpus_per_task"] or 1
    return _build(JobSpec, values)


def step_spec_to_proto(spec: StepSpec) -> pb.StepSpec:
    return _copy_to_proto(spec, pb.StepSpec())


def step_spec_from_proto(msg: pb.StepSpec) -> StepSpec:
    return _build(StepSpec, _values_from_proto(StepSpec, msg))


def step_to_proto(step: Step) -> pb.StepInfo:
    return pb.StepInfo(
        step_id=step.step_id,
        spec=step_spec_to_proto(step.spec),
        state=step.state.value,
        start_time=step.start_time,
        end_time=step.end_time,
        exit_code=step.exit_code,
        signal=step.signal,
        allocation=[allocation_to_proto(a) for a in step.allocation],
        exited_nodes=step.exited_nodes,
    )


def allocation_to_proto(a: NodeAllocation) -> pb.NodeAllocation:
    return pb.NodeAllocation(node=a.node, cpus=a.cpus, mem_mb=a.mem_mb, gpus=a.gpus, tasks=a.tasks)


def allocation_from_proto(m: pb.NodeAllocation) -> NodeAllocation:
    return NodeAllocation(node=m.node, cpus=m.cpus, mem_mb=m.mem_mb, gpus=list(m.gpus), tasks=m.tasks)


def embedded_field(number: int, data: bytes) -> bytes:
    """Field ``number`` holding the encoded message (or bytes) ``data``, as protobuf writes a
    length-delimited field: tag, length, ``data``."""
    return varint(number << 3 | 2) + varint(len(data)) + data


_LAUNCH_JOB_FIELD = pb.LaunchJobRequest.DESCRIPTOR.fields_by_name["job"].number


def launch_request_bytes(
    info: pb.JobInfo, *, node: str, first_task: int, batch: bool, fence_term: int, cluster_id: str
) -> bytes:
    """``LaunchJobRequest(job=info, node=..., ...).SerializeToString()``, without copying ``info``
    into the request: its encoding is written as the request's ``job`` field, ahead of the rest.
    Decodes to the same message (``job`` is the lowest field number, so this is also protobuf's
    order); only map entries (the environment) may come out in another order, as they may from one
    serialization to the next. Building the message copied the whole job, script and environment
    included: about half of a launch's encoding."""
    rest = pb.LaunchJobRequest(
        node=node, first_task=first_task, batch=batch, fence_term=fence_term, cluster_id=cluster_id
    )
    return embedded_field(_LAUNCH_JOB_FIELD, info.SerializeToString()) + rest.SerializeToString()


def job_to_proto(job: Job, *, include_script: bool = True) -> pb.JobInfo:
    dependency = "(null)"  # dependency_display's answer for a job without one
    if job.spec.dependency:  # imported only then: srun's start-up does not pay for the module
        from spur.core.eligibility import dependency_display

        dependency = dependency_display(job)
    spec = spec_to_proto(job.spec, include_script=include_script)
    values = {
        "job_id": job.job_id,
        "user": job.user,
        "uid": job.uid,
        "gid": job.gid,
        "group": job.group,
        "state": job.state.value,
        "reason": job.reason,
        "submit_time": job.submit_time,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "partition": job.partition,
        "time_limit_secs": job.time_limit_secs,
        "priority": job.priority,
        "array_job_id": job.array_job_id,
        "array_max_running": job.array_max_running,
        "array_task_count": job.array_task_count,
        "array_task_min": job.array_task_min,
        "array_task_max": job.array_task_max,
        "dependency": dependency,
        "eligible_time": job.eligible_time,
        "restarts": job.restarts,
        "suspend_time": job.suspend_time,
        "suspended_secs": job.suspended_secs,
        "submit_host": job.spec.environment.get("SLURM_SUBMIT_HOST", ""),
    }
    # Only set values go to the constructor (proto3 defaults are the zero values; much faster).
    kwargs = {k: v for k, v in values.items() if v}
    if job.array_task_id is not None:  # optional: 0 is a task id, presence matters
        kwargs["array_task_id"] = job.array_task_id
    if job.allocation:
        kwargs["allocation"] = [allocation_to_proto(a) for a in job.allocation]
        kwargs["nodelist"] = compress(job.nodes)
    if job.steps:
        kwargs["steps"] = [step_to_proto(st) for st in job.steps]
    kwargs["spec"] = spec
    return _message(pb.JobInfo, kwargs)


def gpu_to_proto(g: GpuDevice) -> pb.GpuDevice:
    return pb.GpuDevice(index=g.index, vendor=g.vendor, model=g.model, pci_bus_id=g.pci_bus_id)


def gpu_from_proto(m: pb.GpuDevice) -> GpuDevice:
    return GpuDevice(index=m.index, vendor=m.vendor, model=m.model, pci_bus_id=m.pci_bus_id)


def node_from_register(req: pb.RegisterNodeRequest, address: str) -> Node:
    return Node(
        name=req.name,
        address=address,
        port=req.port or 6818,
        cpus=max(1, req.cpus),
        memory_mb=req.memory_mb,
        gpus=[gpu_from_proto(g) for g in req.gpus],
        boot_time=req.boot_time,
        version=req.version,
        sockets=req.sockets or 1,
        cores_per_socket=req.cores_per_socket or max(1, req.cpus),
        threads_per_core=req.threads_per_core or 1,
        arch=req.arch,
        os=req.os,
        features=list(req.features),
        comment=req.comment,
    )


def partition_to_proto(p: Partition, nodes: list[str]) -> pb.PartitionInfo:
    return pb.PartitionInfo(
        name=p.name,
        state=p.state.value,
        is_default=p.is_default,
        nodes=nodes,
        max_time_secs=p.max_time_secs,
        default_time_secs=p.default_time_secs,
        nodes_expr=p.nodes_expr,
        enforce_limits=p.enforce_limits,
    )
