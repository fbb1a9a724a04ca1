"""``spur net`` and spurd's mesh options as a user meets them, and the kernel WireGuard backend where
this kernel has the module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spur.agent.main import UsageError, parse_args
from spur.cli.net import format_members, format_status
from spur.net.backend import KernelBackend, kernel_module_available, select_backend
from spur.rpc.proto import mesh_pb2

BIN = Path(sys.executable).parent


def spur(*args: str, user: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPUR_CONF", "SPUR_AGENT")}
    argv = [str(BIN / "spur"), *args]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as another user")
@pytest.mark.parametrize("args", [("join",), ("leave",), ("mesh", "--apply")])
def test_changing_the_network_needs_root(args: tuple[str, ...]) -> None:
    proc = spur("net", *args, user=65534)
    assert proc.returncode == 1
    what = "spur net " + " ".join(args)
    assert proc.stderr == (
        f"spur net: error: {what} changes this host's network interfaces and must run as root (sudo {what})\n"
    )


def test_bad_usage_and_an_absent_spurd_are_one_clear_line(tmp_path: Path) -> None:
    proc = spur("net", "frobnicate")
    assert (proc.returncode, proc.stderr) == (
        2,
        "spur net: error: unknown command 'frobnicate' (expected join, leave, mesh or status)\n",
    )
    proc = spur("net", "status", "--bogus")
    assert proc.returncode == 2 and "unknown argument '--bogus' for status" in proc.stderr
    from integration.harness import free_port

    port = free_port()
    proc = spur("net", "status", "--agent", f"127.0.0.1:{port}")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"spur net: error: cannot reach the local spurd at 127.0.0.1:{port} (")
    assert proc.stderr.endswith("is spurd running?\n") and proc.stderr.count("\n") == 1


def test_status_and_mesh_tables() -> None:
    st = mesh_pb2.NetStatus(
        joined=True,
        interface="spur0",
        backend="wireguard-go",
        interface_up=True,
        address="10.44.0.1/16",
        public_key="K1",
        listen_port=51820,
        peers=[
            mesh_pb2.PeerStatus(
                node="n2",
                public_key="K2",
                endpoint="192.0.2.2:51820",
                allowed_ips=["10.44.0.2/32"],
                last_handshake=990,
                rx_bytes=5,
                tx_bytes=7,
            )
        ],
    )
    text = format_status(st, now=1000)
    assert "interface:  spur0 (up)\nbackend:    wireguard-go\n" in text
    assert "n2    192.0.2.2:51820  10.44.0.2/32  10s ago    5         7         K2" in text
    assert text.endswith("in agreement with the controller\n")
    st.disagreements.append("peer n3 missing")
    assert format_status(st, now=1000).endswith("disagreements with the controller:\n  - peer n3 missing\n")
    ms = mesh_pb2.MemberSet(
        node="n1",
        address="10.44.0.1",
        cidr="10.44.0.0/16",
        listen_port=51820,
        members=[
            mesh_pb2.Member(node="n1", public_key="K1", endpoint="192.0.2.1:51820", address="10.44.0.1"),
            mesh_pb2.Member(
                node="n2",
                public_key="K2",
                endpoint="192.0.2.2:51820",
                address="10.44.0.2",
                pod_cidr="10.42.2.0/24",
            ),
        ],
    )
    lines = format_members(ms).splitlines()
    assert lines[0] == "mesh for node n1: address 10.44.0.1 in 10.44.0.0/16, udp 51820"
    assert lines[2].split() == ["n1", "(this", "node)", "10.44.0.1", "192.0.2.1:51820", "10.44.0.1/32", "K1"]
    assert lines[3].split()[-2:] == ["10.44.0.2/32,10.42.2.0/24", "K2"]


def test_spurd_endpoint_option(tmp_path: Path) -> None:
    assert parse_args(["--wg-endpoint", "192.0.2.9"]).wg_endpoint == "192.0.2.9:51820"
    conf = tmp_path / "spur.conf"
    conf.write_text('[network]\nwg_port = 51999\nwg_interface = "wg7"\n[agent]\nwg_endpoint = "192.0.2.8"\n')
    opts = parse_args(["-f", str(conf)])
    assert (opts.wg_endpoint, opts.wg_port, opts.wg_interface) == ("192.0.2.8:51999", 51999, "wg7")
    assert parse_args(["-f", str(conf), "--wg-endpoint", "[2001:db8::1]:7"]).wg_endpoint == "[2001:db8::1]:7"
    assert parse_args([]).wg_endpoint is None
    with pytest.raises(UsageError, match="invalid --wg-endpoint: 'node9' is not an IP address"):
        parse_args(["--wg-endpoint", "node9"])


def test_the_backend_is_chosen_at_run_time() -> None:
    backend = select_backend("spur0")
    assert backend.name == ("kernel" if kernel_module_available() else "wireguard-go")


@pytest.mark.skipif(
    not kernel_module_available(),
    reason="this kernel has no WireGuard module (/sys/module/wireguard absent): the netlink backend "
    "cannot create an interface here; the userspace backend is tested on real tunnels instead",
)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create interfaces")
def test_kernel_backend_round_trip() -> None:
    import trio

    from spur.net.backend import new_private_key
    from spur.net.model import desired_peers, diff_peers
    from tests.test_mesh_logic import members

    async def run() -> None:
        name = f"smk{os.getpid() % 100000}"
        backend = KernelBackend(name)
        try:
            await backend.create(new_private_key(), 0)
            wanted = desired_peers(members(3, pods=True), "n1")
            await backend.apply(diff_peers({}, wanted))
            device = await backend.device()
            assert not diff_peers(device.peers, wanted)
            await backend.apply(diff_peers(device.peers, desired_peers(members(2), "n1")))
            assert sorted((await backend.device()).peers) == sorted(desired_peers(members(2), "n1"))
        finally:
            await backend.destroy()

    trio.run(run)
