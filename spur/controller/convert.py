"""Conversion between the state's dataclasses and the wire (protobuf) messages."""

from __future__ import annotations

from dataclasses import fields

from spur.core.job import GpuDevice, Job, JobSpec, Node, NodeAllocation, Partition
from spur.rpc.proto import spur_pb2 as pb

_SPEC_FIELDS = [f.name for f in fields(JobSpec)]


def spec_to_proto(spec: JobSpec) -> pb.JobSpec:
    msg = pb.JobSpec()
    for name in _SPEC_FIELDS:
        value = getattr(spec, name)
        if isinstance(value, list):
            getattr(msg, name).extend(value)
        elif isinstance(value, dict):
            getattr(msg, name).update(value)
        else:
            setattr(msg, name, value)
    return msg


def spec_from_proto(msg: pb.JobSpec) -> JobSpec:
    """Build a JobSpec, applying the wire defaults (0 nodes/cpus-per-task mean 1)."""
    values = {}
    for name in _SPEC_FIELDS:
        value = getattr(msg, name)
        if name == "environment":
            value = dict(value)
        elif not isinstance(value, str | int | bool | float):
            value = list(value)
        values[name] = value
    values["num_nodes"] = values["num_nodes"] or 1
    values["cpus_per_task"] = values["cpus_per_task"] or 1
    return JobSpec(**values)


def allocation_to_proto(a: NodeAllocation) -> pb.NodeAllocation:
    return pb.NodeAllocation(node=a.node, cpus=a.cpus, mem_mb=a.mem_mb, gpus=a.gpus, tasks=a.tasks)


def allocation_from_proto(m: pb.NodeAllocation) -> NodeAllocation:
    return NodeAllocation(node=m.node, cpus=m.cpus, mem_mb=m.mem_mb, gpus=list(m.gpus), tasks=m.tasks)


def job_to_proto(job: Job, *, include_script: bool = True) -> pb.JobInfo:
    from spur.core.hostlist import compress

    spec = spec_to_proto(job.spec)
    if not include_script:
        spec.script = ""
        spec.environment.clear()
    return pb.JobInfo(
        job_id=job.job_id,
        spec=spec,
        user=job.user,
        uid=job.uid,
        gid=job.gid,
        group=job.group,
        state=job.state.value,
        reason=job.reason,
        submit_time=job.submit_time,
        start_time=job.start_time,
        end_time=job.end_time,
        allocation=[allocation_to_proto(a) for a in job.allocation],
        exit_code=job.exit_code,
        signal=job.signal,
        partition=job.partition,
        time_limit_secs=job.time_limit_secs,
        priority=job.priority,
        nodelist=compress(job.nodes) if job.allocation else "",
    )


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
    )
