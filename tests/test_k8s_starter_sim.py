"""The starter inside the real reconcile task (K8sReconciler), on Trio's MockClock (autojump): the
replicated state is real (commands go through the log codec), the agents are a simulated fleet at the
K0sAgent RPC edge. Simulated hours run in well under a second."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace

import trio
import trio.testing
from prometheus_client import CollectorRegistry

from spur.cli.k8s import format_status
from spur.config.model import ClusterConfig
from spur.core.job import Node
from spur.k8s.cluster import starter as s
from spur.k8s.cluster.planner import Inventory, ScopeRequest, plan_up
from spur.k8s.cluster.service import K8sClusterService
from spur.k8s.cluster.task import K8sReconciler
from spur.metrics.k8s import K8sMetrics
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state import k8s_cluster as k
from spur.state.machine import ClusterState

NODES = ("cp", "w1", "w2")
TICK = 2.0
REFUSAL = "node w1: k0s start failed (exit 1): no space left on device"


class Fleet:
    """The agents: each node's k0s state, and what a start does there (``run``: k0s runs; ``refuse``:
    the agent answers with an error; ``hang``: no answer ever; ``fail``: the unit fails at once)."""

    def __init__(self) -> None:
        self.k0s = dict.fromkeys(NODES, "absent")
        self.on_start: dict[str, str] = {}
        self.starts: list[tuple[str, float]] = []

    def starts_of(self, node: str) -> list[float]:
        return [t for n, t in self.starts if n == node]

    async def __call__(self, node: str, method: str, request, timeout: float):
        if method == "Status":
            state = self.k0s[node]
            return k0s_pb2.K0sStatus(component_state=state,
                                     detail="k0s unit failed (exit-code)" if state == "failed" else "")
        if method == "CreateToken":
            return k0s_pb2.K0sTokenResponse(token="secret-token")
        assert method == "Apply", method
        self.starts.append((node, trio.current_time()))
        mode = self.on_start.get(node, "run")
        if mode == "hang":
            await trio.sleep_forever()
        if mode == "refuse":
            raise RpcError(StatusCode.FAILED_PRECONDITION, REFUSAL)
        self.k0s[node] = "failed" if mode == "fail" else "active"
        return await self(node, "Status", k0s_pb2.K0sStatusRequest(), timeout)


class Sim:
    def __init__(self) -> None:
        self.state = ClusterState()
        for name in NODES:
            self.state.nodes[name] = Node(name=name, address="127.0.0.1")
        plan = plan_up(ScopeRequest(), Inventory(nodes=NODES))
        self.apply(k.K8sUp(plan.scoped, list(plan.members), list(plan.control_planes), plan.roles,
                           plan.pod_cidrs, {}, trio.current_time()))
        self.fleet = Fleet()
        self.registry = CollectorRegistry(auto_describe=False)
        self.metrics = K8sMetrics(self.registry, lambda: self.state)
        self.reconciler = self.new_leader()

    def apply(self, cmd):
        return self.state.apply(self.state.applied_index + 1, c.encode(cmd))

    def new_leader(self) -> K8sReconciler:
        async def propose(cmd):
            return self.apply(cmd)

        return K8sReconciler(state=self.state, propose=propose, call_agent=self.fleet,
                             cluster_cfg=ClusterConfig(enabled=True, k8s_provisioning_timeout_secs=600),
                             now=trio.current_time, interval=TICK, metrics=self.metrics)

    @property
    def record(self) -> k.K8sClusterRecord:
        return self.state.domains["k8s_cluster"].record

    def start_failures(self, role: str = "worker") -> float:
        return self.registry.get_sample_value("spur_k8s_start_failures_total", {"role": role}) or 0.0

    async def until(self, what, limit: float = 3600.0) -> float:
        """Poll (each simulated second) until ``what()``; the simulated time it took."""
        began = trio.current_time()
        while not what():
            assert trio.current_time() - began < limit, "condition not reached in simulated time"
            await trio.sleep(1.0)
        return trio.current_time() - began


async def status_text(sim: Sim) -> str:
    """What ``spur k8s status`` prints, from the service's own status (recorded states, no agent calls)."""
    service = K8sClusterService(SimpleNamespace(state=sim.state, k8s_reconciler=sim.reconciler))
    return format_status(await service._status(live=False))


def line_of(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [node])


@contextlib.asynccontextmanager
async def running(sim: Sim, reconciler: K8sReconciler | None = None) -> AsyncIterator[Sim]:
    async with trio.open_nursery() as nursery:
        await nursery.start((reconciler or sim.reconciler).run)
        yield sim
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------- tests


async def test_a_ready_clusters_stopped_worker_is_started_again(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        assert sim.fleet.starts[0][0] == "cp" and sorted(n for n, _ in sim.fleet.starts[1:]) == ["w1", "w2"]
        sim.fleet.k0s["w1"] = "inactive"  # its unit was stopped (or the host rebooted)
        stopped = trio.current_time()
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 2)
        await sim.until(lambda: sim.record.nodes["w1"].component_state == "active")
        assert sim.fleet.starts_of("w1")[-1] - stopped <= TICK, "started at the next tick, no wait"
        assert sim.start_failures() == 0


async def test_degraded_cluster_starts_nothing(autojump_clock):
    sim = Sim()
    sim.fleet.on_start["w2"] = "fail"
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "degraded")
        assert sim.record.phase_since == 600.0
        sent = len(sim.fleet.starts)
        sim.fleet.k0s["w1"] = "inactive"
        await trio.sleep(3600)
        assert len(sim.fleet.starts) == sent, "nothing is started in degraded"


async def test_a_start_with_no_answer_in_15_minutes_is_recorded_and_counted(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.on_start["w1"] = "hang"
        sim.fleet.k0s["w1"] = "inactive"
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 2)
        sent = sim.fleet.starts_of("w1")[-1]
        assert sim.reconciler.starts["w1"].in_flight_since == sent
        text = line_of(await status_text(sim), "w1")
        assert "start=in-flight since=" in text

        await trio.sleep(sent + s.START_TIMEOUT - 1.0 - trio.current_time())
        assert len(sim.fleet.starts_of("w1")) == 2, "never a second start while one is in flight"
        assert sim.start_failures() == 0 and sim.record.nodes["w1"].reason == ""

        await trio.sleep(2.0)
        assert sim.record.nodes["w1"].reason == "no answer to the k0s start within 900s"
        assert sim.start_failures() == 1
        st = sim.reconciler.starts["w1"]
        assert st.in_flight_since is None and st.failures == 1
        assert st.retry_at == sent + s.START_TIMEOUT + 60.0
        text = line_of(await status_text(sim), "w1")
        assert "start=waiting failures=1 retry=" in text
        assert text.endswith("reason: no answer to the k0s start within 900s")
        # the retry a minute later is answered: the node runs, the wait is gone
        sim.fleet.on_start["w1"] = "run"
        await sim.until(lambda: sim.record.nodes["w1"].component_state == "active")
        assert sim.fleet.starts_of("w1")[-1] - (sent + s.START_TIMEOUT) >= 60.0
        assert "w1" not in sim.reconciler.starts
        assert sim.record.nodes["w1"].reason == ""


async def test_provisioning_timeout_comes_before_the_start_timeout(autojump_clock):
    sim = Sim()
    sim.fleet.on_start["w2"] = "hang"
    async with running(sim):
        await sim.until(lambda: sim.record.phase != "provisioning")
        assert sim.record.phase == "degraded" and trio.current_time() < s.START_TIMEOUT
        assert sim.record.nodes["w2"].reason == "k0s is pending after 600s of provisioning"
        # the hung start still ends at 900 s and is counted, with its own reason
        await trio.sleep(s.START_TIMEOUT - trio.current_time() + 5.0)
        assert sim.start_failures() == 1
        assert sim.record.nodes["w2"].reason == "no answer to the k0s start within 900s"
        assert len(sim.fleet.starts_of("w2")) == 1, "degraded: no retry"


async def test_a_failing_node_is_retried_after_60_120_240_480_600_600_seconds(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.on_start["w1"] = "refuse"
        sim.fleet.k0s["w1"] = "inactive"
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 8, limit=3 * 3600)
        times = sim.fleet.starts_of("w1")[1:]
        waits = [b - a for a, b in zip(times, times[1:], strict=False)]
        for wait, expected in zip(waits, [60, 120, 240, 480, 600, 600], strict=True):
            assert expected <= wait <= expected + TICK, waits
        assert sim.start_failures() == 7
        assert sim.record.nodes["w1"].reason == REFUSAL
        assert sim.record.nodes["w1"].component_state == "inactive", "a failed start keeps the node's state"
        assert sim.record.phase == "ready"


async def test_the_wait_is_dropped_once_the_node_runs(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.on_start["w1"] = "refuse"
        sim.fleet.k0s["w1"] = "inactive"
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 4)  # 3 failures: the wait is now 240 s
        assert sim.reconciler.starts["w1"].failures == 3
        sim.fleet.k0s["w1"] = "active"  # it came up by itself (an operator started it)
        await sim.until(lambda: "w1" not in sim.reconciler.starts)
        sim.fleet.k0s["w1"] = "inactive"  # stopped again: started at once, and the next wait is 60 s
        stopped = trio.current_time()
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 6)
        first, second = sim.fleet.starts_of("w1")[-2:]
        assert first - stopped <= TICK + 1.0
        assert 60 <= second - first <= 60 + TICK


async def test_the_wait_is_dropped_when_the_node_comes_back_from_down(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.on_start["w1"] = "refuse"
        sim.fleet.k0s["w1"] = "inactive"
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 5)  # 4 failures: the wait is now 480 s
        sim.state.nodes["w1"].down = True
        await trio.sleep(30)
        assert len(sim.fleet.starts_of("w1")) == 5, "a down node is not started"
        sim.fleet.on_start["w1"] = "run"
        sim.state.nodes["w1"].down = False
        back = trio.current_time()
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 6)
        assert sim.fleet.starts_of("w1")[-1] - back <= TICK + 1.0, "no wait after coming back from down"
        await sim.until(lambda: sim.record.nodes["w1"].component_state == "active")


async def test_a_unit_systemd_gave_up_on_is_retried_after_a_minute(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.k0s["w2"] = "failed"
        failed_at = trio.current_time()
        await sim.until(lambda: len(sim.fleet.starts_of("w2")) == 2)
        assert 60 <= sim.fleet.starts_of("w2")[-1] - failed_at <= 60 + 2 * TICK
        assert sim.start_failures() == 0, "the unit's own failure is not a failed start"
        await sim.until(lambda: sim.record.nodes["w2"].component_state == "active")
        # a start after which the unit fails again is a failed start: counted, next wait 120 s
        sim.fleet.on_start["w2"] = "fail"
        sim.fleet.k0s["w2"] = "failed"
        await sim.until(lambda: len(sim.fleet.starts_of("w2")) == 4)
        a, b = sim.fleet.starts_of("w2")[-2:]
        assert 120 <= b - a <= 120 + TICK
        assert sim.start_failures() == 2
        assert sim.record.nodes["w2"].reason == "k0s unit failed (exit-code)"


async def test_a_new_leader_starts_the_backoff_over(autojump_clock):
    sim = Sim()
    async with running(sim):
        await sim.until(lambda: sim.record.phase == "ready")
        sim.fleet.on_start["w1"] = "refuse"
        sim.fleet.k0s["w1"] = "inactive"
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == 5)
    successor = sim.new_leader()
    assert successor.starts == {}
    before = len(sim.fleet.starts_of("w1"))
    elected = trio.current_time()
    async with running(sim, successor):
        await sim.until(lambda: len(sim.fleet.starts_of("w1")) == before + 1)
        assert sim.fleet.starts_of("w1")[-1] - elected <= TICK
