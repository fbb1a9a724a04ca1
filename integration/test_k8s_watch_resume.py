"""The operator's watches across a partition from the API server, on both backends.

The operator reaches the API server through a forwarder the test can cut (integration/tcp_proxy.py);
kubectl and the harness's kubelet talk to the server directly. ``--resync`` is long (600 s), so a
change made while the operator was cut off can only reach it through its watches:

- cut, change, mend: the dropped watch resumes from the last resourceVersion it saw and delivers what
  happened meanwhile, without listing again;
- cut, change, let the history go, mend: the resumed watch is answered 410 Gone (the version was
  compacted away) and the operator lists again, then watches from the list.

"Let the history go" is an etcd compaction on the real server (the uncached one, so its watches read
etcd: ``uncached_kube_server``) and, on the double, more changes than its ``--history``."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from integration.harness import wait_for
from integration.operator_harness import KubeBackend, OperatorEnv, operator_env, spurjob
from integration.tcp_proxy import cuttable_proxy

#: How many changes a watch of the double can resume across (its --history).
DOUBLE_HISTORY = 40

EXPIRED = "expired (410"
RESUMED = "resuming from resourceVersion"


def _job_id(env: OperatorEnv, name: str) -> int:
    return int(env.spurjob(name).get("status", {}).get("jobId") or 0)


def _spur_nodes(env: OperatorEnv) -> set[str]:
    out = env.cluster.cli("sinfo", "-h", "-N", "-o", "%N").stdout
    return set(out.split())


def _let_history_go(env: OperatorEnv) -> None:
    real = env.backend.real
    if real is not None:
        real.compact()
        return
    for i in range(DOUBLE_HISTORY + 5):
        resp = env.kubelet.http.post(
            f"/api/v1/namespaces/{env.namespace}/configmaps",
            json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"filler-{i}"}},
        )
        assert resp.status_code == 201, resp.text


def test_watches_resume_after_a_partition_and_list_again_when_expired(
    tmp_path: Path, expiring_kube_backend: KubeBackend
) -> None:
    backend = expiring_kube_backend
    with operator_env(tmp_path, backend, double_args=("--history", str(DOUBLE_HISTORY))) as env:
        target = urllib.parse.urlsplit(env.url)
        assert target.hostname and target.port
        with cuttable_proxy((target.hostname, target.port)) as proxy:
            env.url = f"{target.scheme}://127.0.0.1:{proxy.port}"
            env.resync = 600
            env.start_operator()
            env.wait_nodes("gpu-node-1", "gpu-node-2")
            env.apply(spurjob("before", ["#SBATCH -N 1", "sleep 600"]))
            wait_for(lambda: _job_id(env, "before"), timeout=30, what="the first SpurJob submitted")

            # 1. a partition with the history intact: the watches pick up where they were
            proxy.cut()
            env.apply(spurjob("during-cut", ["#SBATCH -N 1", "sleep 600"]))
            proxy.mend()
            wait_for(
                lambda: _job_id(env, "during-cut"),
                timeout=60,
                what=f"the SpurJob made during the cut submitted (operator log:\n{env.log_tail()})",
            )
            log = env.operator.log() if env.operator else ""
            assert RESUMED in log
            assert EXPIRED not in log  # nothing was listed again

            # 2. a partition that outlasts the history: 410, list, watch again
            proxy.cut()
            env.apply(spurjob("after-expiry", ["#SBATCH -N 1", "sleep 600"]))
            env.kubectl("delete", "node", "gpu-node-2")
            _let_history_go(env)
            proxy.mend()
            wait_for(
                lambda: _job_id(env, "after-expiry"),
                timeout=60,
                what=f"the SpurJob made before the expiry submitted (operator log:\n{env.log_tail()})",
            )
            wait_for(
                lambda: _spur_nodes(env) == {"gpu-node-1"},
                timeout=60,
                what="the node deleted during the cut gone from Spur",
            )
            log = env.operator.log() if env.operator else ""
            assert EXPIRED in log and "listing again" in log
            # one job per SpurJob: neither the resumption nor the list submitted anything twice
            ids = [_job_id(env, n) for n in ("before", "during-cut", "after-expiry")]
            assert len(set(ids)) == 3
            out = env.cluster.cli("squeue", "-h", "-o", "%i").stdout.split()
            assert sorted(int(i) for i in out) == sorted(ids)
