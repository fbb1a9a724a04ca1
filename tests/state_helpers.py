"""Helpers for state-machine tests: a command log applied exactly as Raft would, and builders."""

from __future__ import annotations

from spur.core.job import GpuDevice, JobSpec, Node
from spur.state import commands as c
from spur.state.machine import ClusterState

SCRIPT = "#!/bin/sh\necho hi\n"


class Log:
    """Feeds commands through encode/apply exactly as Raft would, keeping the log for replay."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.entries: list[bytes] = []

    def __call__(self, cmd):
        data = c.encode(cmd)
        self.entries.append(data)
        return self.state.apply(len(self.entries), data)

    def replay(self) -> ClusterState:
        fresh = ClusterState()
        for i, data in enumerate(self.entries, 1):
            fresh.apply(i, data)
        return fresh


def spec(**kw) -> JobSpec:
    kw.setdefault("script", SCRIPT)
    kw.setdefault("work_dir", "/tmp")
    return JobSpec(**kw)


def submit(log: Log, **kw) -> int:
    return log(c.SubmitJob(spec(**kw), "alice", 1000, 1000, "alice", 100.0))


def register(log: Log, name: str, cpus: int = 4, mem: int = 8000, gpus: int = 0) -> None:
    node = Node(
        name=name,
        address="127.0.0.1",
        cpus=cpus,
        memory_mb=mem,
        gpus=[GpuDevice(i, "nvidia", "a100") for i in range(gpus)],
    )
    assert log(c.RegisterNode(node, 50.0)) is True
