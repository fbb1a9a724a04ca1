"""``spur node drain|resume|remove``: the Spur scheduling layer's view of nodes (administrators).

``drain`` stops new jobs from starting on the nodes (running jobs finish), like ``scontrol update
NodeName=... State=DRAIN Reason=...``; ``resume`` puts them back in service. Neither touches k0s: a
node that is a member of the Spur-managed Kubernetes cluster keeps running its pods.

``remove`` takes the nodes out of Spur's inventory (``scontrol delete NodeName=...``): it is refused
for a node that still runs jobs, and it neither drains Kubernetes pods nor stops k0s. To shrink a
running Kubernetes cluster use ``spur k8s remove-nodes`` first (cordon, drain, k0s reset), then
``spur node remove`` if the host is also leaving Spur. A removed node's spurd that is still running
registers again at its next heartbeat, so stop it first.

NODES is a hostlist (``gpu[01-04],head``); every name must be a registered node, else nothing changes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub

PROG = "spur node"
USAGE = """Usage: spur node drain NODES [--reason TEXT]
       spur node resume NODES
       spur node remove NODES"""
SUBCOMMANDS = {
    "drain": "Stop scheduling Spur jobs on the nodes (running jobs finish); k0s is not touched (admin).",
    "resume": "Put drained or down nodes back in service (admin).",
    "remove": "Take idle nodes out of the inventory; does not drain pods or stop k0s (admin).",
}
OPERANDS = "nodes"
OPTION_HELP = {"reason": "why the nodes are drained (shown by sinfo -R; default: 'drained by USER')"}


def build_parser() -> argparse.ArgumentParser:
    """The options of ``spur node`` (documentation hook, see spur.cli.main)."""
    parser = argparse.ArgumentParser(prog=PROG, add_help=False)
    parser.add_argument("--reason", metavar="TEXT", help=OPTION_HELP["reason"])
    return parser


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _nodes_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("nodes", metavar="NODES", help=f"the nodes to {what} (a hostlist)")


def _check_hostlist(parser: argparse.ArgumentParser, expr: str) -> None:
    """A malformed hostlist is a usage error here, before anything is sent."""
    from spur.core.hostlist import HostlistError, expand

    try:
        if not expand(expr):
            parser.error("no node given")
    except HostlistError as exc:
        parser.error(str(exc))


def cmd_drain(args: list[str]) -> int:
    from spur.cli.client import with_controller
    from spur.rpc.proto import spur_pb2 as pb

    parser = argparse.ArgumentParser(prog=f"{PROG} drain")
    _nodes_arg(parser, "drain")
    parser.add_argument("--reason", metavar="TEXT", help=OPTION_HELP["reason"])
    opts = parser.parse_args(args)
    _check_hostlist(parser, opts.nodes)
    reason = (opts.reason if opts.reason is not None else f"drained by {_user()}").strip()
    if not reason:
        parser.error("--reason must not be empty")
    req = pb.UpdateNodeRequest(nodes=opts.nodes, state="DRAIN", reason=reason)
    with_controller(lambda stub: stub.UpdateNode(req, timeout=30))
    print(f"drained {opts.nodes} (reason: {reason}); running jobs finish, no new ones start")
    return 0


def cmd_resume(args: list[str]) -> int:
    from spur.cli.client import with_controller
    from spur.rpc.proto import spur_pb2 as pb

    parser = argparse.ArgumentParser(prog=f"{PROG} resume")
    _nodes_arg(parser, "put back in service")
    opts = parser.parse_args(args)
    _check_hostlist(parser, opts.nodes)
    req = pb.UpdateNodeRequest(nodes=opts.nodes, state="RESUME", reason="")
    with_controller(lambda stub: stub.UpdateNode(req, timeout=30))
    print(f"resumed {opts.nodes}")
    return 0


def cmd_remove(args: list[str]) -> int:
    from spur.cli.client import with_controller
    from spur.rpc.proto import inventory_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} remove")
    _nodes_arg(parser, "remove from the inventory")
    opts = parser.parse_args(args)
    _check_hostlist(parser, opts.nodes)

    async def body(stub: ControllerStub) -> Any:
        from spur.cli.client import service_stub

        inventory = service_stub(stub, inventory_pb2.DESCRIPTOR.services_by_name["Inventory"])
        return await inventory.RemoveNodes(inventory_pb2.RemoveNodesRequest(nodes=opts.nodes), timeout=30)

    members = _k8s_members()
    resp = with_controller(body)
    print(
        f"removed {','.join(resp.removed)} from the inventory (k0s and pods untouched; "
        "stop spurd there or the node registers again)"
    )
    still = [n for n in resp.removed if n in members]
    if still:
        print(
            f"{PROG} remove: note: {','.join(still)} still run k0s as members of the Spur-managed Kubernetes "
            "cluster; spur k8s remove-nodes drains and resets a worker",
            file=sys.stderr,
        )
    return 0


def _k8s_members() -> set[str]:
    """Nodes of the Spur-managed Kubernetes cluster (empty when it is off, down or not answering)."""
    from spur.cli.client import CliError
    from spur.cli.k8s import _call
    from spur.rpc.proto import k8s_pb2

    try:
        st = _call("Status", k8s_pb2.K8sStatusRequest(), timeout=10.0)
    except CliError:
        return set()
    return {n.name for n in st.nodes} if st.phase != "down" else set()


COMMANDS = {"drain": cmd_drain, "resume": cmd_resume, "remove": cmd_remove}


def main(args: list[str]) -> int:
    """Run ``spur node ARGS``; 0 on success, 1 when the controller refuses, 2 on a usage error."""
    from spur.cli.subcommands import run_subcommand

    return run_subcommand("node", USAGE, COMMANDS, args)
