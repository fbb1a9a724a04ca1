"""Controllers of the StatefulSet find their Raft id from their hostname (spurctld-0, -1, -2).

Three real spurctld processes run with the deployment guide's spur.conf peers list, unchanged,
each in its own UTS namespace with hostname spurctld-N (``unshare --uts``, as root) and its own
mount namespace whose /etc/hosts maps the peers' StatefulSet DNS names to private loopback
addresses, as the cluster DNS would map them to pod IPs. They elect one leader. A controller
whose hostname matches no peer refuses to start and names the peers.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from integration.harness import BIN, Proc, free_port, wait_for
from spur.config import load_config
from spur.config.addr import parse_addr

EXAMPLE_CONF = Path(__file__).resolve().parent.parent / "examples" / "k8s" / "spur.conf"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for UTS namespaces",
)


def _peers() -> list[str]:
    return list(load_config(EXAMPLE_CONF).controller.peers)


def _loopback_block() -> str:
    """A /24 inside 127.0.0.0/8 that no other test picks (the peers' fixed port 6821 binds there)."""
    return f"127.{random.randint(64, 250)}.{random.randint(1, 250)}"


def _status(address: str) -> Any | None:
    import trio

    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    async def call() -> Any:
        with trio.fail_after(3):
            async with open_channel(address, connect_timeout=1.0, metadata_provider=identity_metadata) as ch:
                return await controller_stub(ch).GetControllerStatus(pb.Empty(), timeout=2)

    try:
        return trio.run(call)
    except (RpcError, trio.TooSlowError, OSError):
        return None


def _launch(root: Path, hostname: str, hosts: Path, conf: Path, log: Path) -> Proc:
    script = f'mount --bind "{hosts}" /etc/hosts && hostname "{hostname}" && exec "{BIN / "spurctld"}" -D -f "{conf}"'
    argv = ["unshare", "--uts", "--mount", "--", "sh", "-c", script]
    env = dict(os.environ)
    env.pop("SPUR_CONF", None)
    return Proc(argv, log, env).start()


def _conf(root: Path, name: str, block: str, index: int, grpc_port: int) -> Path:
    """The example's cluster, peers and scheduler, plus where this test's controller keeps state and
    listens (its own loopback address; Raft on the port its peers entry names)."""
    peers = _peers()
    _, raft_port = parse_addr(peers[index], 6821)
    ip = f"{block}.{11 + index}"
    conf = root / f"{name}.conf"
    quoted = ", ".join(f'"{p}"' for p in peers)
    conf.write_text(
        'cluster_name = "spur-k8s"\n'
        "[controller]\n"
        f"peers = [{quoted}]\n"
        f'listen_addr = "{ip}:{grpc_port}"\n'
        f'raft_listen_addr = "{ip}:{raft_port}"\n'
        f'rest_addr = "{ip}:{free_port()}"\n'
        f'state_dir = "{root / name}"\n'
        "election_timeout_min_ms = 500\n"
        "election_timeout_max_ms = 1000\n"
        "heartbeat_ms = 100\n"
        "[scheduler]\n"
        "interval_secs = 2\n"
        'plugin = "backfill"\n'
        "[[partitions]]\n"
        'name = "default"\n'
        'state = "UP"\n'
        "default = true\n"
    )
    return conf


def test_three_statefulset_controllers_elect_a_leader(tmp_path: Path) -> None:
    peers = _peers()
    assert len(peers) == 3
    block = _loopback_block()
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "127.0.0.1 localhost\n"
        + "".join(f"{block}.{11 + i} {parse_addr(p, 6821)[0]}\n" for i, p in enumerate(peers))
    )
    procs: list[Proc] = []
    addresses: list[str] = []
    try:
        for i in range(3):
            port = free_port()
            conf = _conf(tmp_path, f"spurctld-{i}", block, i, port)
            procs.append(_launch(tmp_path, f"spurctld-{i}", hosts, conf, tmp_path / f"spurctld-{i}.log"))
            addresses.append(f"{block}.{11 + i}:{port}")

        def one_leader() -> dict[int, Any] | None:
            for p in procs:
                if not p.alive():
                    raise AssertionError(f"a controller exited:\n{p.log()}")
            statuses = [_status(a) for a in addresses]
            if any(s is None for s in statuses):
                return None
            leaders = [s for s in statuses if s.role == "leader"]
            if len(leaders) != 1 or any(
                s.term != leaders[0].term or s.leader_address != leaders[0].address for s in statuses
            ):
                return None
            return {i: s for i, s in enumerate(statuses)}

        statuses = wait_for(one_leader, timeout=60, interval=0.2, what="one Raft leader among spurctld-0..2")
        # each derived its id from its hostname: spurctld-N is member N+1
        assert [statuses[i].node_id for i in range(3)] == [1, 2, 3]
        leader = next(i for i, s in statuses.items() if s.role == "leader")
        assert "leader for term" in procs[leader].log()
        # peers know each other by their StatefulSet DNS names
        assert statuses[leader].address.startswith(f"spurctld-{leader}.spurctld.spur.svc.cluster.local:")
    finally:
        for p in procs:
            p.kill()


def test_a_hostname_matching_no_peer_fails_fast_naming_the_peers(tmp_path: Path) -> None:
    block = _loopback_block()
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    conf = _conf(tmp_path, "stray", block, 0, free_port())
    proc = _launch(tmp_path, "spur-controller", hosts, conf, tmp_path / "stray.log")
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
    for peer in _peers():
        assert peer in log
