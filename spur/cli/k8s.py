"""``spur k8s``: Spur-managed Kubernetes (k0s).

``up``, ``status``, ``down``, ``add-nodes``, ``remove-nodes`` and ``kubeconfig`` talk to spurctld
(the K8sCluster service); ``up`` shows the cluster's progress until it is ready (or degraded) unless
``--no-wait``. ``install-k0s`` works on the local node only.

``spur k8s install-k0s [--version TAG|latest] [--path P] [--force]`` installs the k0s binary on this
node: it downloads the release for this machine's architecture from ``[cluster] k0s_release_url``,
checks its SHA-256 against the release's published ``sha256sums.txt`` and only then installs it
(temporary file + rename, mode 0755). A mismatch installs nothing. Defaults: ``[cluster]
k0s_version`` and ``[cluster] k0s_binary``. Run it as root for the default path.

With ``[cluster] enabled = false`` (the default) every ``spur k8s`` command says the feature is off
and how to turn it on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub
    from spur.rpc.proto import k8s_pb2 as kpb

PROG = "spur k8s"
USAGE = """Usage: spur k8s up [--nodes HOSTLIST] [--partition P] [--selector K=V ...]
                   [--control-plane-node H | --control-plane-nodes H1,H2,H3] [--replicas 1|3|5] [--no-wait]
       spur k8s status
       spur k8s down [--reset]
       spur k8s add-nodes --nodes HOSTLIST | --partition P | --selector K=V
       spur k8s remove-nodes --nodes HOSTLIST [--drain-timeout SECS] [--force]
       spur k8s kubeconfig [--user NAME | --admin]
       spur k8s install-k0s [--version TAG|latest] [--path PATH] [--force]"""
SUBCOMMANDS = {
    "up": "Provision and start the cluster (idempotent; admin). Shows progress until ready unless --no-wait.",
    "status": "Cluster phase, control plane(s) and each node's role, live k0s state, enabled flag, start, reason.",
    "down": "Stop and disable k0s on every node (admin); --reset also runs k0s reset (wipes cluster state).",
    "add-nodes": "Add worker nodes to a running scoped cluster (admin).",
    "remove-nodes": "Cordon, drain (PDB-aware), stop and k0s reset workers, then forget them (admin).",
    "kubeconfig": "Print a kubeconfig: your own namespace; --user NAME / --admin need admin.",
    "install-k0s": "Download, SHA-256-verify and install the k0s binary on this node (run as root).",
}
OPTION_HELP = {
    "version": "k0s release tag, or 'latest' (default: [cluster] k0s_version)",
    "path": "where to install the binary (default: [cluster] k0s_binary)",
    "force": "replace a binary already at the path",
}
OFF_MESSAGE = (
    "Spur-managed Kubernetes is off ([cluster] enabled = false). To turn it on, set enabled = true "
    "in the [cluster] section of spur.conf on the controller and on every node, then restart "
    "spurctld and spurd."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{PROG} install-k0s", add_help=True)
    parser.add_argument("--version", metavar="TAG", help=OPTION_HELP["version"])
    parser.add_argument("--path", metavar="PATH", help=OPTION_HELP["path"])
    parser.add_argument("--force", action="store_true", help=OPTION_HELP["force"])
    return parser


def _cluster_config():  # -> ClusterConfig
    from spur.cli.client import _config
    from spur.config.model import ClusterConfig

    cfg = _config()
    return cfg.cluster if cfg is not None else ClusterConfig()


def install_k0s_main(args: list[str]) -> int:
    from spur.k8s.cluster.install import InstallError, install_k0s

    opts = build_parser().parse_args(args)
    cluster = _cluster_config()
    if not cluster.enabled:
        print(f"{PROG}: {OFF_MESSAGE}", file=sys.stderr)
        return 1
    path = Path(opts.path) if opts.path else cluster.k0s_binary
    version = opts.version or cluster.k0s_version
    try:
        result = install_k0s(version=version, path=path, base_url=cluster.k0s_release_url, force=opts.force)
    except InstallError as exc:
        print(f"{PROG} install-k0s: error: {exc}", file=sys.stderr)
        return 1
    if result.skipped:
        print(f"k0s is already installed at {path}; nothing done (use --force to replace it with {result.tag})")
    else:
        print(f"installed k0s {result.tag} at {path} (sha256 {result.sha256} verified)")
    return 0


def _stub(controller_stub: ControllerStub) -> ControllerStub:
    from spur.cli.client import service_stub
    from spur.rpc.proto import k8s_pb2

    return service_stub(controller_stub, k8s_pb2.DESCRIPTOR.services_by_name["K8sCluster"])


def _call(method: str, request: Any, timeout: float = 60.0) -> Any:
    from spur.cli.client import with_controller

    return with_controller(lambda stub: getattr(_stub(stub), method)(request, timeout=timeout), timeout=timeout)


def _scope_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", default="", metavar="HOSTLIST", help="nodes by hostlist, e.g. gpu[01-08]")
    parser.add_argument("--partition", default="", metavar="P", help="the nodes of a partition")
    parser.add_argument("--selector", action="append", default=[], metavar="K=V",
                        help="nodes with feature K=V (repeatable, ANDed)")


def _when(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def format_start(n: kpb.K8sNodeInfo) -> str:
    """The leader's start state of one node, as ``key=value`` words ("" when there is none):
    ``start=in-flight since=T``, or ``start=waiting failures=N retry=T`` (no start before T), then
    ``start-failure: why`` when it differs from the node's reason (which the last failure sets)."""
    words = []
    if n.start_in_flight_since:
        words.append(f"start=in-flight since={_when(n.start_in_flight_since)}")
    elif n.start_retry_at:
        words.append(f"start=waiting failures={n.start_failures} retry={_when(n.start_retry_at)}")
    if n.start_failure and n.start_failure != n.reason:
        words.append(f"start-failure: {n.start_failure}")
    return "  ".join(words)


def format_status(st: kpb.K8sClusterStatus) -> str:
    """``spur k8s status`` text: phase, control plane(s), one line per node (its start state, then
    its reason, last; plus an indented line with its drift/stray state when the leader's drift sweep
    has one), then the nodes outside the cluster that have drift."""
    lines = [f"phase: {st.phase}"]
    lines.append(f"control-plane: {','.join(st.control_planes) or '-'}")
    if st.phase != "down":
        lines.append(f"scope: {'scoped' if st.scoped else 'whole inventory'}")
    width = max([len(n.name) for n in st.nodes] + [4])
    for n in st.nodes:
        line = f"  {n.name:<{width}}  {n.role:<10}  {n.component_state:<12}  enabled={str(n.enabled).lower()}"
        start = format_start(n)
        if start:
            line += f"  {start}"
        if n.reason:
            line += f"  reason: {n.reason}"
        lines.append(line)
        if n.drift:
            lines.append(f"  {'':<{width}}  {n.drift}")
    if st.outside:
        lines.append("outside the cluster:")
        for n in st.outside:
            lines.append(f"  {n.name:<{width}}  {n.drift}")
    return "\n".join(lines)


def cmd_up(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} up")
    _scope_args(parser)
    cp = parser.add_mutually_exclusive_group()
    cp.add_argument("--control-plane-node", default="", metavar="H", help="the control-plane node")
    cp.add_argument("--control-plane-nodes", default="", metavar="H1,H2,H3",
                    help="the control-plane nodes (first = etcd bootstrap); wins over --replicas")
    parser.add_argument("--replicas", type=int, default=0, choices=(1, 3, 5), help="control-plane count")
    parser.add_argument("--no-wait", action="store_true", help="return once provisioning has started")
    opts = parser.parse_args(args)
    explicit = [h.strip() for h in (opts.control_plane_nodes or opts.control_plane_node).split(",") if h.strip()]
    request = k8s_pb2.K8sUpRequest(
        nodes=opts.nodes, partition=opts.partition, selectors=opts.selector,
        control_plane_nodes=explicit, replicas=opts.replicas,
    )
    st = _call("Up", request)
    print(f"spur k8s up: {st.message}")
    if opts.no_wait:
        print(format_status(st))
        return 0
    return _watch()


def _watch(interval: float = 1.0) -> int:
    """Print the cluster's status whenever it changes, until ready (0) or degraded/down (1)."""
    import time

    from spur.rpc.proto import k8s_pb2

    last = ""
    while True:
        st = _call("Status", k8s_pb2.K8sStatusRequest())
        text = format_status(st)
        if text != last:
            print(text, flush=True)
            last = text
        if st.phase in ("ready", "degraded", "down"):
            return 0 if st.phase == "ready" else 1
        time.sleep(interval)


def cmd_status(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    argparse.ArgumentParser(prog=f"{PROG} status").parse_args(args)
    print(format_status(_call("Status", k8s_pb2.K8sStatusRequest())))
    return 0


def cmd_down(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} down")
    parser.add_argument("--reset", action="store_true", help="also k0s reset every node (wipes cluster state)")
    opts = parser.parse_args(args)
    st = _call("Down", k8s_pb2.K8sDownRequest(reset=opts.reset))
    print(f"spur k8s down: {st.message}")
    return 0


def cmd_add_nodes(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} add-nodes")
    _scope_args(parser)
    opts = parser.parse_args(args)
    resp = _call("AddNodes", k8s_pb2.K8sNodesRequest(nodes=opts.nodes, partition=opts.partition,
                                                      selectors=opts.selector))
    print(f"spur k8s add-nodes: {resp.message}")
    return 0


def cmd_remove_nodes(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} remove-nodes")
    parser.add_argument("--nodes", default="", metavar="HOSTLIST", help="the workers to remove")
    parser.add_argument("--drain-timeout", type=float, default=0.0, metavar="SECS",
                        help="how long a drain may wait for evictions (default 120)")
    parser.add_argument("--force", action="store_true",
                        help="skip the running-jobs guard; evict past a PodDisruptionBudget or the timeout")
    opts = parser.parse_args(args)
    if opts.drain_timeout < 0:
        parser.error("--drain-timeout must not be negative")
    timeout = (opts.drain_timeout or 120.0) * 2 + 600
    resp = _call("RemoveNodes", k8s_pb2.K8sNodesRequest(nodes=opts.nodes, drain_timeout_secs=opts.drain_timeout,
                                                         force=opts.force), timeout=timeout)
    print(f"spur k8s remove-nodes: {resp.message}")
    return 0


def cmd_kubeconfig(args: list[str]) -> int:
    from spur.rpc.proto import k8s_pb2

    parser = argparse.ArgumentParser(prog=f"{PROG} kubeconfig")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--user", default="", metavar="NAME", help="another user's scoped kubeconfig (admin)")
    group.add_argument("--admin", action="store_true", help="the cluster-admin kubeconfig (admin)")
    opts = parser.parse_args(args)
    resp = _call("Kubeconfig", k8s_pb2.K8sKubeconfigRequest(user=opts.user, admin=opts.admin))
    sys.stdout.write(resp.kubeconfig)
    return 0


COMMANDS = {
    "up": cmd_up,
    "status": cmd_status,
    "down": cmd_down,
    "add-nodes": cmd_add_nodes,
    "remove-nodes": cmd_remove_nodes,
    "kubeconfig": cmd_kubeconfig,
    "install-k0s": install_k0s_main,
}


def main(args: list[str]) -> int:
    """Run ``spur k8s ARGS``; 0 on success, 1 when the controller refuses, 2 on a usage error."""
    from spur.cli.subcommands import run_subcommand

    return run_subcommand("k8s", USAGE, COMMANDS, args, plain_messages=("Spur-managed Kubernetes is off",))
