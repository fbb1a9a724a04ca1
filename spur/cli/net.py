"""``spur net join|leave|mesh|status``: the WireGuard mesh between the nodes (see docs/mesh.md).

The commands run on a node and talk to that node's spurd (the MeshAgent service on the agent port),
which owns the interface, the key and the backend; spurd talks to the controller. ``join``, ``leave``
and ``mesh --apply`` change the host's network and need root.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spur.rpc.proto.mesh_pb2 import MemberSet, NetStatus

USAGE = """Usage: spur net join [--agent HOST:PORT]
       spur net leave [--agent HOST:PORT]
       spur net mesh [--apply] [--agent HOST:PORT]
       spur net status [--agent HOST:PORT]

The WireGuard mesh ([network] wg_enabled) between the nodes, run on a node:
  join     create the mesh interface (spur0), a key pair (the private key never leaves the node),
           get this node's mesh address from the controller and publish the public key (root)
  leave    remove the interface and the key; the controller releases the address (root)
  mesh     show the membership the controller wants for this node; --apply applies it once (root)
  status   interface, backend, peers (last handshake, bytes) and disagreements with the controller
Options:
  --agent HOST:PORT   the local spurd (default: $SPUR_AGENT, else 127.0.0.1 and the [agent] listen_addr port)
"""

ROOT_VERBS = ("join", "leave")

SUBCOMMANDS = {
    "join": "create spur0 and a key pair, get this node's mesh address, publish the public key (root)",
    "leave": "remove the interface and the key; the controller releases the address (root)",
    "mesh": "show the membership the controller wants for this node; --apply applies it (root)",
    "status": "interface, backend, peers (handshake, bytes), disagreements with the controller",
}


def option_docs():  # -> list[spur.cli.cmdinfo.OptionDoc]
    """The options of spur net (documentation hook, see spur.cli.main)."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc(
            "agent",
            None,
            "required",
            "HOST:PORT",
            "the local spurd (default: $SPUR_AGENT, else 127.0.0.1 and the [agent] listen_addr port)",
        ),
        OptionDoc("apply", None, help="with mesh: apply the controller's membership once (root)"),
    ]


class UsageError(ValueError):
    pass


def agent_target(flag: str | None) -> str:
    """The local spurd: --agent, $SPUR_AGENT, else 127.0.0.1 with the config's agent port (6818)."""
    if flag:
        return flag
    env = os.environ.get("SPUR_AGENT")
    if env:
        return env
    from spur.cli.client import _config

    cfg = _config()
    port = 6818
    if cfg is not None:
        port = int(cfg.agent.listen_addr.rpartition(":")[2] or 6818)
    return f"127.0.0.1:{port}"


def _call(target: str, method: str, request: Any, timeout: float = 60.0) -> Any:
    import trio

    from spur.cli.client import CliError, call_metadata, client_tls
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import mesh_pb2
    from spur.rpc.status import RpcError, StatusCode
    from spur.rpc.stub import Stub

    md = call_metadata()

    async def run() -> Any:
        async with open_channel(
            target, connect_timeout=5.0, metadata_provider=lambda: md, tls=client_tls()
        ) as ch:
            stub = Stub(ch, mesh_pb2.DESCRIPTOR.services_by_name["MeshAgent"])
            return await getattr(stub, method)(request, timeout=timeout)

    try:
        return trio.run(run)
    except RpcError as exc:
        if exc.code is StatusCode.UNAVAILABLE:
            raise CliError(
                f"cannot reach the local spurd at {target} ({exc.message}); is spurd running?"
            ) from None
        raise CliError(exc.message) from None


def _ago(ts: float, now: float) -> str:
    if not ts:
        return "never"
    secs = max(0, int(now - ts))
    if secs < 120:
        return f"{secs}s ago"
    if secs < 7200:
        return f"{secs // 60}m ago"
    return f"{secs // 3600}h ago"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = [header, *rows]
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in lines
    )


def format_status(st: NetStatus, now: float | None = None) -> str:
    """The ``spur net status`` text (a NetStatus message)."""
    now = time.time() if now is None else now
    lines = [
        f"interface:  {st.interface} ({'up' if st.interface_up else 'missing or down'})",
        f"backend:    {st.backend or 'none'}",
        f"joined:     {'yes' if st.joined else 'no'}",
        f"address:    {st.address or '-'}",
        f"public key: {st.public_key or '-'}",
        f"listening:  udp {st.listen_port}",
        f"peers:      {len(st.peers)}",
    ]
    out = "\n".join(lines) + "\n"
    if st.peers:
        rows = [
            (
                p.node or "?",
                p.endpoint or "-",
                ",".join(p.allowed_ips) or "-",
                _ago(p.last_handshake, now),
                str(p.rx_bytes),
                str(p.tx_bytes),
                p.public_key,
            )
            for p in st.peers
        ]
        header = ("NODE", "ENDPOINT", "ALLOWED_IPS", "HANDSHAKE", "RX_BYTES", "TX_BYTES", "PUBLIC_KEY")
        out += _table(header, rows)
    if st.disagreements:
        out += "disagreements with the controller:\n" + "".join(f"  - {d}\n" for d in st.disagreements)
    else:
        out += "in agreement with the controller\n"
    return out


def format_members(ms: MemberSet) -> str:
    """The ``spur net mesh`` text (a MemberSet message)."""
    from spur.net.model import allowed_ips
    from spur.net.reconcile import member_from_proto

    head = f"mesh for node {ms.node}: address {ms.address or '-'} in {ms.cidr}, udp {ms.listen_port}\n"
    rows = []
    for m in ms.members:
        member = member_from_proto(m)
        rows.append(
            (
                m.node + (" (this node)" if m.node == ms.node else ""),
                m.address,
                m.endpoint,
                ",".join(allowed_ips(member)),
                m.public_key,
            )
        )
    return head + _table(("NODE", "ADDRESS", "ENDPOINT", "ALLOWED_IPS", "PUBLIC_KEY"), rows)


def parse(args: list[str]) -> tuple[str, str | None, bool]:
    """(verb, --agent value, --apply)."""
    verb, agent, apply = args[0], None, False
    rest = args[1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, value = arg.partition("=")
        if name == "--agent":
            if not eq:
                if i + 1 >= len(rest):
                    raise UsageError("--agent needs HOST:PORT")
                value = rest[i + 1]
                i += 1
            agent = value
        elif arg == "--apply" and verb == "mesh":
            apply = True
        else:
            raise UsageError(f"unknown argument {arg!r} for {verb} (see spur net --help)")
        i += 1
    return verb, agent, apply


def main(args: list[str]) -> int:
    from spur.cli.client import CliError
    from spur.rpc.proto import mesh_pb2

    if not args:
        print(USAGE, end="", file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):  # generated from SUBCOMMANDS and option_docs, like every verb
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("net", "--help")
    if args[0] in ("--usage", "-V", "--version"):
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("net", args[0])
    if args[0] not in ("join", "leave", "mesh", "status"):
        print(
            f"spur net: error: unknown command {args[0]!r} (expected join, leave, mesh or status)",
            file=sys.stderr,
        )
        return 2
    try:
        verb, agent, apply = parse(args)
    except UsageError as exc:
        print(f"spur net: error: {exc}", file=sys.stderr)
        return 2
    if (verb in ROOT_VERBS or apply) and os.geteuid() != 0:
        what = f"spur net {verb}{' --apply' if apply else ''}"
        print(
            f"spur net: error: {what} changes this host's network interfaces and must run as root "
            f"(sudo {what})",
            file=sys.stderr,
        )
        return 1
    try:
        target = agent_target(agent)
        empty = mesh_pb2.NetEmpty()
        if verb == "join":
            st = _call(target, "JoinMesh", empty)
            print(
                f"joined the mesh: {st.interface} {st.address} ({st.backend}), {len(st.peers)} peer(s), "
                f"public key {st.public_key}"
            )
        elif verb == "leave":
            st = _call(target, "LeaveMesh", empty)
            print(f"left the mesh: {st.interface} removed, key deleted, address released")
        elif verb == "mesh":
            if apply:
                r = _call(target, "ApplyWanted", empty)
                rebuilt = ", interface rebuilt" if r.recreated else ""
                print(f"applied: {r.added} added, {r.updated} updated, {r.removed} removed{rebuilt}")
            else:
                sys.stdout.write(format_members(_call(target, "Wanted", empty)))
        else:
            sys.stdout.write(format_status(_call(target, "Status", empty)))
    except CliError as exc:
        print(f"spur net: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return 0
