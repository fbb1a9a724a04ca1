from __future__ import annotations

import pytest

from integration.harness import Cluster


@pytest.fixture
def cluster(tmp_path):
    """A controller on loopback (agents are started by each test)."""
    c = Cluster(tmp_path)
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()
        _cleanup_jobs(c)


def _cleanup_jobs(c: Cluster) -> None:
    """Kill any job process group the test left behind (jobs outlive agents by design)."""
    import os
    import signal

    for agent_dir in [*c.root.glob("agent-*/jobs/*"), *c.root.glob("agent-*/clusters/*/jobs/*")]:
        for name in ("pgid", "pid"):
            f = agent_dir / name
            if f.exists():
                try:
                    os.killpg(int(f.read_text().split()[0]), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
