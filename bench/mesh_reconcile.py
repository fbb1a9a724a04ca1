"""WireGuard mesh reconcile costs at 1,000 nodes.

1. Controller: one reconcile decision (members from the replicated state, diff against the previous
   pass, the pushed MemberSet message and the MemberDelta built and serialized) for a 1,000-node
   membership, with no change and with one re-keyed node. Target: under 50 ms per interval; the
   delta of an unchanged interval under 100 bytes per node.
2. Agent: applying a 1,000-peer membership to a real wireguard-go interface (userspace backend, in a
   private network namespace with a private /run/wireguard): the first push (1,000 peers added), a push
   with nothing to change (UAPI get + decode + diff), and a push with one re-keyed peer. Needs root and
   wireguard-go; skipped with the reason otherwise.

Run: ``.venv/bin/python -m bench.mesh_reconcile [--nodes 1000] [--repeat 20]``. Prints figures, never
asserts.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import subprocess
import sys
import time

from spur.core.job import Node
from spur.net.model import Member
from spur.net.reconcile import build_member_delta, build_member_set, plan_reconcile
from spur.state import commands as c
from spur.state.machine import ClusterState
from spur.state.mesh import JoinMesh, MeshDomain


def key(i: int) -> str:
    return base64.b64encode(i.to_bytes(4, "big") + bytes(28)).decode()


def members(n: int, salt: int = 0) -> list[Member]:
    return [
        Member(
            f"n{i:04d}", key(i + salt), f"10.{i // 250}.{i % 250}.1:51820", f"10.44.{i // 250}.{i % 250 + 1}"
        )
        for i in range(n)
    ]


def controller_bench(nodes: int, repeat: int) -> None:
    state = ClusterState()
    for i in range(nodes):
        state.apply_command(c.RegisterNode(Node(name=f"n{i:04d}", address="127.0.0.1", cpus=1), 1.0))
        ip = f"192.0.{i // 250}.{i % 250 + 1}:51820"
        state.apply_command(JoinMesh(f"n{i:04d}", "10.44.0.0/16", key(i), ip, 1.0))
    domain = state.domains["mesh"]
    assert isinstance(domain, MeshDomain)

    def one_pass(previous: dict, base: int) -> tuple[float, dict, int, int]:
        """(ms, members, whole-set bytes, delta bytes) of one pass on top of ``previous``/``base``."""
        began = time.perf_counter()
        plan = plan_reconcile(domain.members(), previous, domain.departed())
        message = build_member_set(
            list(plan.members.values()), cidr="10.44.0.0/16", listen_port=51820, version=domain.version
        )
        size = len(message.SerializeToString())
        delta = build_member_delta(
            plan, base_version=base, version=domain.version, cidr="10.44.0.0/16", listen_port=51820
        )
        delta_size = len(delta.SerializeToString())
        return (time.perf_counter() - began) * 1000, plan.members, size, delta_size

    _, previous, _, _ = one_pass({}, 0)
    same, changed = [], []
    size = same_delta = changed_delta = 0
    for i in range(repeat):
        ms, previous, size, same_delta = one_pass(previous, domain.version)
        same.append(ms)
        base = domain.version
        state.apply_command(JoinMesh("n0007", "10.44.0.0/16", key(100_000 + i), "192.0.0.8:51820", 2.0))
        ms, previous, size, changed_delta = one_pass(previous, base)
        changed.append(ms)
    print(f"controller reconcile decision, {nodes} members (target < 50 ms per interval):")
    print(f"  no change:     median {statistics.median(same):.1f} ms, max {max(same):.1f} ms")
    print(f"  one re-keyed:  median {statistics.median(changed):.1f} ms, max {max(changed):.1f} ms")
    print(f"  whole set: {size / 1024:.0f} KiB per push (sent to a node that holds no set of this leader's)")
    print(
        f"  delta per push: {same_delta} B with no change (target < 100 B), {changed_delta} B with one re-keyed node;"
        f" an unchanged interval sends {same_delta * nodes / 1024:.1f} KiB in all instead of"
        f" {size * nodes / 1024 / 1024:.0f} MiB"
    )


def agent_bench(nodes: int, repeat: int) -> None:
    """Runs inside the private namespace (see main)."""
    import trio

    from spur.net import links
    from spur.net.backend import UserspaceBackend, new_private_key
    from spur.net.model import desired_peers, diff_peers

    async def run() -> None:
        backend = UserspaceBackend("spur0", shutil.which("wireguard-go") or "wireguard-go")
        await backend.create(new_private_key(), 51820)
        await links.set_address_and_up("spur0", "10.44.255.254", 16)
        wanted = desired_peers(members(nodes), "self")

        async def push(target: dict) -> tuple[float, int]:
            began = time.perf_counter()
            actual = (await backend.device()).peers
            diff = diff_peers(actual, target)
            await backend.apply(diff)
            return (time.perf_counter() - began) * 1000, len(diff.upsert) + len(diff.remove)

        first, changes = await push(wanted)
        assert len((await backend.device()).peers) == nodes
        print(f"agent, wireguard-go backend, {nodes} peers:")
        print(f"  first push ({changes} peers added): {first:.0f} ms")
        same, one = [], []
        for i in range(repeat):
            ms, n = await push(wanted)
            assert n == 0
            same.append(ms)
            rekeyed = dict(wanted)
            old = next(iter(rekeyed))
            peer = rekeyed.pop(old)
            new_key = key(200_000 + i)
            rekeyed[new_key] = type(peer)(new_key, peer.endpoint, peer.allowed_ips, peer.keepalive)
            ms, n = await push(rekeyed)
            one.append(ms)
            wanted = rekeyed
        print(f"  push, nothing to change: median {statistics.median(same):.0f} ms, max {max(same):.0f} ms")
        print(f"  push, one re-keyed peer: median {statistics.median(one):.0f} ms, max {max(one):.0f} ms")
        await backend.destroy()

    trio.run(run)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--agent-part", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.agent_part:
        agent_bench(args.nodes, args.repeat)
        return 0
    controller_bench(args.nodes, args.repeat)
    if os.geteuid() != 0 or shutil.which("wireguard-go") is None:
        print("agent: skipped (needs root and wireguard-go)")
        return 0
    ns = f"smbench{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        script = 'mkdir -p /run/wireguard && mount -t tmpfs spur-wg /run/wireguard && exec "$@"'
        cmd = [sys.executable, "-m", "bench.mesh_reconcile", "--agent-part", "--nodes", str(args.nodes)]
        cmd += ["--repeat", str(args.repeat)]
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script, "bench", *cmd], check=False)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
