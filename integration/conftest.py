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


@pytest.fixture(scope="session")
def pg():
    """A private PostgreSQL server for the whole test session (never the system cluster)."""
    from integration.postgres import PgCluster, find_pg_bin

    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: run scripts/setup.sh as root")
    server = PgCluster(bin_dir)
    try:
        yield server.init()
    finally:
        server.destroy()


@pytest.fixture
def pg_db(pg, request):
    """A fresh, empty database on the session server; yields its URL."""
    import re

    name = "t_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50]
    pg.psql(f"DROP DATABASE IF EXISTS {name}")
    pg.psql(f"CREATE DATABASE {name}")
    yield pg.url.rsplit("/", 1)[0] + "/" + name
