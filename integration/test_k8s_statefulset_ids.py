"""Controllers of the StatefulSet find their Raft id from their hostname (spurctld-0, -1, -2).

Three real spurctld processes run with the deployment guide's spur.conf peers list, unchanged,
each in its own UTS namespace with hostname spurctld-N (see ``integration.k8s_harness``). They
elect one leader; each took the id of the peers entry its hostname names. A controller whose
hostname matches no peer refuses to start and names the peers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from integration.harness import free_port
from integration.k8s_harness import StatefulSetControllers, example_peers

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for UTS namespaces",
)


def test_three_statefulset_controllers_elect_a_leader(tmp_path: Path) -> None:
    assert len(example_peers()) == 3
    ctls = StatefulSetControllers(tmp_path)
    try:
        ctls.start(3)
        statuses = ctls.wait_leader()
        # each derived its id from its hostname: spurctld-N is member N+1
        assert [statuses[i].node_id for i in range(3)] == [1, 2, 3]
        leader = next(i for i, s in statuses.items() if s.role == "leader")
        assert "leader for term" in ctls.procs[leader].log()
        # peers know each other by their StatefulSet DNS names
        assert statuses[leader].address.startswith(f"spurctld-{leader}.spurctld.spur.svc.cluster.local:")
    finally:
        ctls.stop()


def test_a_hostname_matching_no_peer_fails_fast_naming_the_peers(tmp_path: Path) -> None:
    ctls = StatefulSetControllers(tmp_path)
    proc = ctls.launch("spur-controller", ctls.conf("stray", 0, free_port()), tmp_path / "stray.log")
    try:
        assert proc.popen is not None
        assert proc.popen.wait(timeout=30) == 1
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(
            f"spurctld kept running with a hostname matching no peer:\n{proc.log()}"
        ) from None
    log = proc.log()
    assert "spurctld: error:" in log and "'spur-controller' matches no peer" in log
    for peer in example_peers():
        assert peer in log
