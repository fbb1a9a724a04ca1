"""A pending job's resource request, normalised into per-node needs.

Normalisation rules (Slurm-like):

* node count ``n`` is ``max(num_nodes, len(nodelist), 1)``;
* with ``ntasks_per_node`` every node gets exactly that many tasks; with one node it gets all
  tasks; with ``num_tasks <= n`` every node gets one task; otherwise tasks are *variable*: every
  node gets at least one and the rest fill the chosen nodes in order up to what each can hold
  (Slurm's default block distribution);
* memory per node is ``mem_per_node_mb``, else ``mem_per_cpu_mb`` times the CPUs on that node;
* ``gpus_total`` over ``n`` nodes needs ``ceil(gpus_total / n)`` free GPUs on every chosen node and
  is handed out evenly (the first ``gpus_total % n`` nodes get one more);
* a time limit ``<= 0`` means unlimited (Slurm treats ``--time=0`` as no limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from spur.core.frozen_init import quick_init
from spur.core.scheduling import PendingView


@quick_init
@dataclass(frozen=True)
class Request:
    n: int  # nodes
    uniform: bool  # every node gets ``tpn`` tasks
    tpn: int  # tasks per node when uniform; minimum (1) when variable
    total_tasks: int
    cpt: int  # cpus per task
    need_c: int  # cpus needed on a node for ``tpn`` tasks
    need_m: int  # memory needed on a node for ``tpn`` tasks
    mem_per_node: int
    mem_per_cpu: int
    gpn: int  # free GPUs needed on every node
    gpus_total: int  # 0 unless GPUs are requested over the whole allocation
    gpu_type: str
    exclusive: bool
    duration: float  # seconds; math.inf when unlimited

    @classmethod
    def of(cls, job: PendingView) -> Request:
        """``job``'s request: one object per shape (requests are immutable), since every pass and
        every immediate grant asks again for jobs that mostly share a few shapes."""
        return _of_shape(
            job.num_nodes, len(job.nodelist), job.cpus_per_task, job.ntasks_per_node, job.num_tasks,
            job.mem_per_node_mb, job.mem_per_cpu_mb, job.gpus_per_node, job.gpus_total, job.gpu_type,
            job.exclusive, job.time_limit_secs,
        )  # fmt: skip

    @classmethod
    def _build(
        cls, num_nodes: int, listed: int, cpus_per_task: int, ntasks_per_node: int, num_tasks: int,
        mem_per_node_mb: int, mem_per_cpu_mb: int, gpus_per_node: int, gpus_total: int, gpu_type: str,
        exclusive: bool, time_limit_secs: int,
    ) -> Request:  # fmt: skip
        n = max(num_nodes, listed, 1)
        cpt = max(cpus_per_task, 1)
        if ntasks_per_node > 0:
            uniform, tpn, total = True, ntasks_per_node, ntasks_per_node * n
        elif n == 1:
            total = max(num_tasks, 1)
            uniform, tpn = True, total
        elif num_tasks <= n:
            uniform, tpn, total = True, 1, n
        else:
            uniform, tpn, total = False, 1, num_tasks
        mem_per_node = max(mem_per_node_mb, 0)
        mem_per_cpu = 0 if mem_per_node else max(mem_per_cpu_mb, 0)
        need_c = tpn * cpt
        need_m = mem_per_node or mem_per_cpu * need_c
        if gpus_per_node > 0:
            gpn, gpus_total = gpus_per_node, 0
        elif gpus_total > 0:
            gpn, gpus_total = -(-gpus_total // n), gpus_total
        else:
            gpn, gpus_total = 0, 0
        duration = math.inf if time_limit_secs <= 0 else float(time_limit_secs)
        return cls(
            n=n,
            uniform=uniform,
            tpn=tpn,
            total_tasks=total,
            cpt=cpt,
            need_c=need_c,
            need_m=need_m,
            mem_per_node=mem_per_node,
            mem_per_cpu=mem_per_cpu,
            gpn=gpn,
            gpus_total=gpus_total,
            gpu_type=gpu_type.lower(),
            exclusive=exclusive,
            duration=duration,
        )

    def shape(self) -> tuple[object, ...]:
        """Everything but the duration: jobs of one shape fit (or not) on the same nodes."""
        return (
            self.n, self.uniform, self.tpn, self.total_tasks, self.cpt, self.need_m, self.mem_per_cpu,
            self.gpn, self.gpus_total, self.gpu_type, self.exclusive,
        )  # fmt: skip

    def tasks_capacity(self, cpus: int, mem: int) -> int:
        """How many of this job's tasks fit in ``cpus`` and ``mem`` (memory per node counted once)."""
        cap = cpus // self.cpt
        if self.mem_per_cpu:
            cap = min(cap, mem // (self.mem_per_cpu * self.cpt))
        elif self.mem_per_node and mem < self.mem_per_node:
            return 0
        return cap

    def node_share(self, tasks: int) -> tuple[int, int]:
        """CPUs and memory that ``tasks`` of this job take on one node it shares."""
        cpus = tasks * self.cpt
        return cpus, self.mem_per_node or self.mem_per_cpu * cpus

    def gpus_on(self, rank: int) -> int:
        """GPUs handed to the ``rank``-th chosen node."""
        if not self.gpus_total:
            return self.gpn
        base, extra = divmod(self.gpus_total, self.n)
        return base + (1 if rank < extra else 0)


# Requests by shape (the arguments of ``Request._build``); a few shapes cover most jobs.
_of_shape = lru_cache(maxsize=1024)(Request._build)
