"""The operator's virtual agent runs no job step, whatever record a LaunchStep caller sends."""

from __future__ import annotations

import pytest

from spur.k8s.operator.agent import VirtualAgent
from spur.k8s.operator.kube import KubeClient, KubeConfig
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode


async def test_a_forged_root_step_is_refused_and_creates_nothing() -> None:
    kube = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never reached
    agent = VirtualAgent(
        kube,
        send_report=lambda report: None,
        default_namespace="default",
        default_image="busybox",
        watch_namespace=None,
        gpu_resources={},
        cluster_name=lambda: "spur",
    )
    alloc = [pb.NodeAllocation(node="k1", cpus=1, tasks=1)]
    request = pb.LaunchStepRequest(
        job=pb.JobInfo(job_id=5, uid=0, gid=0, user="root", restarts=1, state="RUNNING", allocation=alloc),
        step=pb.StepInfo(step_id=0, state="RUNNING", spec=pb.StepSpec(argv=["id", "-u"]), allocation=alloc),
        node="k1",
    )
    try:
        with pytest.raises(RpcError) as exc:
            await agent.LaunchStep(request, CallContext("/spur.v1.Agent/LaunchStep", {}, "127.0.0.1:1", None))
    finally:
        await kube.aclose()
    assert exc.value.code == StatusCode.UNIMPLEMENTED and "not run on Kubernetes nodes" in exc.value.message
    assert (agent.launches, agent.pods) == (0, {})
