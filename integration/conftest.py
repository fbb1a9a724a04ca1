from __future__ import annotations

import pytest

from integration.harness import Cluster, kill_job_processes


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


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, request):
    """A controller and one agent (``node1``: 2 CPUs, 4,000 MB) shared by a module's tests, which
    leave it as they found it (their jobs ended)."""
    c = Cluster(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]))
    c.start_controller()
    try:
        c.start_agent("node1", cpus=2, memory_mb=4000)
        c.wait_nodes("node1")
        yield c
    finally:
        c.stop()
        _cleanup_jobs(c)


def _cleanup_jobs(c: Cluster) -> None:
    """Kill any job processes the test left behind (jobs outlive agents by design)."""
    kill_job_processes(c.root)


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


@pytest.fixture(scope="session")
def real_kube_server(tmp_path_factory):
    """One real kube-apiserver v1.20.2 + etcd for the whole test session (integration/kube_real.py),
    built first when this machine has none cached. Skipped, with the reason, only where it cannot be
    built (not root, no apt-get); a build or start that fails is an error, not a skip."""
    from integration import kube_real

    if not kube_real.built() and (reason := kube_real.why_unbuildable()) is not None:
        pytest.skip(f"no real kube-apiserver in {kube_real.kube_dir()}: {reason}")
    with kube_real.real_kube(tmp_path_factory.mktemp("kube-apiserver")) as server:
        yield server


def _real_backend(request, server_fixture: str = "real_kube_server"):
    from integration.kube_real import namespace_name
    from integration.operator_harness import KubeBackend

    server = request.getfixturevalue(server_fixture)
    namespace = namespace_name(request.node.name)
    with server.http() as http:
        resp = http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
        assert resp.status_code == 201, resp.text
    return KubeBackend("real", server, namespace)


@pytest.fixture(params=["double", "real"])
def kube_backend(request):
    """The API server a Kubernetes test runs against: the double, or the session's real server with
    a namespace made for this test (integration/operator_harness.py KubeBackend)."""
    from integration.operator_harness import DOUBLE

    return DOUBLE if request.param == "double" else _real_backend(request)


@pytest.fixture
def real_kube_backend(request):
    """The session's real API server only (what the double cannot show: RBAC), in a fresh namespace."""
    return _real_backend(request)


@pytest.fixture(scope="session")
def uncached_kube_server(tmp_path_factory):
    """A second real kube-apiserver for the session, with ``--watch-cache=false``: its watches read
    etcd, so an etcd compaction (``RealKube.compact``) expires a watch's resourceVersion at once, as a
    real cluster's five-minute compaction does to a client that was away. Started only when a test
    asks for it."""
    from integration import kube_real

    if not kube_real.built() and (reason := kube_real.why_unbuildable()) is not None:
        pytest.skip(f"no real kube-apiserver in {kube_real.kube_dir()}: {reason}")
    with kube_real.real_kube(
        tmp_path_factory.mktemp("kube-apiserver-uncached"), apiserver_args=("--watch-cache=false",)
    ) as server:
        yield server


@pytest.fixture(params=["double", "real"])
def expiring_kube_backend(request):
    """Like ``kube_backend``, for watch-expiry tests: the double, or the uncached real server."""
    from integration.operator_harness import DOUBLE

    return DOUBLE if request.param == "double" else _real_backend(request, "uncached_kube_server")
