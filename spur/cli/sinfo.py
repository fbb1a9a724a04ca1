"""``sinfo`` / ``spur nodes``: partitions and nodes in Slurm's layouts."""

from __future__ import annotations

import sys
import time

from spur.cli.client import CliError, with_controller
from spur.cli.formats import parse_format, render, render_header
from spur.cli.slurmargs import SlurmArgParser, split_list

SHORT = {
    "idle": "idle",
    "allocated": "alloc",
    "mixed": "mix",
    "down": "down",
    "drained": "drain",
    "draining": "drng",
    "unknown": "unk",
}
HEADERS = {
    "P": "PARTITION",
    "a": "AVAIL",
    "l": "TIMELIMIT",
    "D": "NODES",
    "t": "STATE",
    "T": "STATE",
    "N": "NODELIST",
    "c": "CPUS",
    "m": "MEMORY",
    "G": "GRES",
    "E": "REASON",
    "z": "S:C:T",
    "f": "AVAIL_FEATURES",
    "C": "CPUS(A/I/O/T)",
    "O": "CPU_LOAD",
    "e": "FREE_MEM",
    "n": "HOSTNAMES",
    "R": "PARTITION",
    "d": "TMP_DISK",
    "w": "WEIGHT",
    "s": "JOB_SIZE",
    "r": "ROOT",
    "h": "OVERSUBSCRIBE",
    "g": "GROUPS",
    "F": "NODES(A/I/O/T)",
    "A": "NODES(A/I)",
    "u": "USER",
    "H": "TIMESTAMP",
    "b": "ACTIVE_FEATURES",
    "o": "NODE_ADDR",
    "v": "VERSION",
    "X": "SOCKETS",
    "Y": "CORES",
    "Z": "THREADS",
}
REASONS_FORMAT = "%20E %9u %19H %N"


def node_state_short(node) -> str:
    short = SHORT.get(node.state, node.state)
    return short + "*" if node.state == "down" and node.reason == "Not responding" else short


def time_limit_text(secs: int) -> str:
    from spur.core.timespec import format_time_limit

    return "infinite" if secs < 0 else format_time_limit(secs)


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser("sinfo")
    p.add_argument("-h", "--noheader", action="store_true")
    p.add_argument("-N", "--Node", action="store_true", dest="node_oriented")
    p.add_argument("-o", "--format")
    p.add_argument("-p", "--partition", action="append")
    p.add_argument("-t", "--states", action="append")
    p.add_argument("-n", "--nodes", action="append")
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-R", "--list-reasons", action="store_true")
    p.add_argument("-s", "--summarize", action="store_true")
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-v", "--verbose", action="count")
    p.add_argument("--json", action="store_true")
    return p


class Row:
    """One output line: a partition (or none) and the nodes it covers."""

    def __init__(self, partition, nodes: list, default: bool) -> None:
        self.partition = partition
        self.nodes = nodes
        self.default = default

    def value(self, letter: str) -> str:
        from spur.core.hostlist import compress

        p, nodes = self.partition, self.nodes
        first = nodes[0] if nodes else None
        match letter:
            case "P" | "R":
                return (p.name + ("*" if self.default and letter == "P" else "")) if p else ""
            case "a":
                return ("up" if p.state == "UP" else p.state.lower()) if p else "up"
            case "l":
                return time_limit_text(p.max_time_secs) if p else "infinite"
            case "D":
                return str(len(nodes))
            case "t":
                return node_state_short(first) if first else "n/a"
            case "T":
                return first.state if first else "n/a"
            case "N" | "n":
                return compress([n.name for n in nodes])
            case "c":
                return str(first.cpus) if first else "0"
            case "m":
                return str(first.memory_mb) if first else "0"
            case "G":
                return f"gpu:{len(first.gpus)}" if first and first.gpus else "(null)"
            case "E":
                return (first.reason or "none") if first else "none"
            case "z":
                return (
                    f"{first.sockets}:{first.cores_per_socket}:{first.threads_per_core}" if first else "0:0:0"
                )
            case "f":
                return ",".join(first.features) or "(null)" if first else "(null)"
            case "C":
                alloc = sum(n.alloc_cpus for n in nodes)
                total = sum(n.cpus for n in nodes)
                other = sum(n.cpus for n in nodes if n.state in ("down", "drained"))
                return f"{alloc}/{total - alloc - other}/{other}/{total}"
            case "e" | "O":
                return "N/A"
            case "d":
                return "0"
            case "w":
                return "1"
            case "s":
                return "1-infinite"
            case "r":
                return "no"
            case "h":
                return "NO"
            case "g":
                return "all"
            case "F" | "A":
                busy = sum(1 for n in nodes if n.state in ("allocated", "mixed", "draining"))
                other = sum(1 for n in nodes if n.state in ("down", "drained", "unknown"))
                idle = len(nodes) - busy - other
                return f"{busy}/{idle}/{other}/{len(nodes)}" if letter == "F" else f"{busy}/{idle}"
            case "u":
                return "root" if first and first.reason else "Unknown"
            case "H":
                return reason_timestamp(first)
            case "b":
                return ",".join(first.features) or "(null)" if first else "(null)"
            case "o":
                return first.address if first else ""
            case "v":
                return first.version or "N/A" if first else "N/A"
            case "X":
                return str(first.sockets) if first else "0"
            case "Y":
                return str(first.cores_per_socket) if first else "0"
            case "Z":
                return str(first.threads_per_core) if first else "0"
        return ""


def summary_rows(partitions, nodes_by_name, node_oriented: bool) -> list[Row]:
    rows: list[Row] = []
    for p in partitions:
        members = [nodes_by_name[n] for n in p.nodes if n in nodes_by_name]
        if node_oriented:
            rows.extend(Row(p, [n], p.is_default) for n in members)
            continue
        if not members:
            rows.append(Row(p, [], p.is_default))
            continue
        groups: dict[str, list] = {}
        for n in members:
            groups.setdefault(node_state_short(n), []).append(n)
        rows.extend(Row(p, group, p.is_default) for group in groups.values())
    if node_oriented:
        rows.sort(key=lambda r: r.nodes[0].name)
    return rows


def reason_timestamp(node) -> str:
    """%H: when the node's reason was set, as Slurm prints it; ``Unknown`` if never."""
    when = getattr(node, "reason_time", 0.0) if node is not None and node.reason else 0.0
    if not when:
        return "Unknown"
    from spur.core.timespec import format_timestamp

    return format_timestamp(when)


# Node states ``sinfo -t`` accepts: Slurm 22.05's list (printed on a bad one), plus the short forms.
VALID_STATES = (
    "unknown,down,idle,allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,perfctrs,"
    "cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot,reboot^,unknown"
)
STATE_ALIASES = (
    frozenset(VALID_STATES.split(",")) | frozenset(SHORT.values()) | {"all", "alloc", "mix", "comp"}
)


def check_states(values: list[str]) -> str | None:
    """Slurm's error lines for the first state ``sinfo -t`` does not know, or None."""
    for value in values:
        if value.lower().rstrip("*") not in STATE_ALIASES:
            return f'sinfo: error: Bad state string: "{value}"\nsinfo: error: valid states: {VALID_STATES}'
    return None


def reason_rows(nodes) -> list[Row]:
    """sinfo -R: down/drained/draining nodes grouped by reason."""
    groups: dict[str, list] = {}
    for n in sorted(nodes, key=lambda n: n.name):
        if n.reason and n.state in ("down", "drained", "draining", "unknown"):
            groups.setdefault(n.reason, []).append(n)
    return [Row(None, members, False) for members in groups.values()]


def node_json(n) -> dict:
    """A node as 22.05's ``sinfo --json`` prints it (the keys tools read)."""
    gres = f"gpu:{len(n.gpus)}" if n.gpus else ""
    return {
        "architecture": n.arch,
        "address": n.address,
        "alloc_cpus": n.alloc_cpus,
        "alloc_memory": n.alloc_mem_mb,
        "boot_time": int(n.boot_time),
        "cores": n.cores_per_socket,
        "cpus": n.cpus,
        "features": ",".join(n.features),
        "active_features": ",".join(n.features),
        "gres": gres,
        "hostname": n.name,
        "idle_cpus": max(0, n.cpus - n.alloc_cpus),
        "name": n.name,
        "operating_system": n.os,
        "partitions": list(n.partitions),
        "port": n.port,
        "real_memory": n.memory_mb,
        "reason": n.reason,
        "slurmd_start_time": int(n.registered_time),
        "sockets": n.sockets,
        "state": n.state,
        "state_flags": ["DRAIN"] if n.state in ("drained", "draining") else [],
        "threads": n.threads_per_core,
        "tres": f"cpu={n.cpus},mem={n.memory_mb}M,billing={n.cpus}"
        + (f",gres/gpu={len(n.gpus)}" if n.gpus else ""),
        "slurmd_version": n.version,
    }


def partition_json(p, nodes_by_name) -> dict:
    members = [nodes_by_name[n] for n in p.nodes if n in nodes_by_name]
    from spur.core.hostlist import compress

    return {
        "flags": ["default"] if p.is_default else [],
        "name": p.name,
        "nodes": compress(p.nodes) if p.nodes else "",
        "state": p.state,
        "total_cpus": sum(n.cpus for n in members),
        "total_nodes": len(members),
        "max_time_limit": None if p.max_time_secs < 0 else p.max_time_secs // 60,
        "default_time_limit": None if p.default_time_secs < 0 else p.default_time_secs // 60,
    }


def sinfo_json(partitions, nodes) -> str:
    import json

    from spur.cli.squeue import slurm_meta

    by_name = {n.name: n for n in nodes}
    doc = {
        "meta": slurm_meta("sinfo"),
        "errors": [],
        "nodes": [node_json(n) for n in sorted(nodes, key=lambda n: n.name)],
        "partitions": [partition_json(p, by_name) for p in partitions],
    }
    return json.dumps(doc, indent=2) + "\n"


def default_format(rows: list[Row], node_oriented: bool, long: bool) -> str:
    pwidth = max([len("PARTITION")] + [len(r.value("P")) for r in rows])
    if node_oriented:
        nwidth = max([len("NODELIST") + 2] + [len(r.value("N")) for r in rows])
        if long:
            return f"%-{nwidth}N %.5D %.{pwidth}P %.11T %-4c %.8z %.6m %.8d %.6w %.8f %-20E"
        return f"%-{nwidth}N %.5D %.{pwidth}P %-6t"
    if long:
        return f"%-{pwidth}P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
    return f"%-{pwidth}P %.5a %.10l %.6D %.6t %N"


def date_line(now: float) -> str:
    """The line ``sinfo -l`` prints above its header: the local time as Slurm's ``slurm_ctime``
    writes it (``Fri Dec 04 13:57:35 2026``: day of month zero-padded)."""
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now))


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    bad_state = check_states(split_list(args.states))
    if bad_state:
        print(bad_state, file=sys.stderr)
        return 1
    from spur.rpc.proto import spur_pb2 as pb

    async def body(stub):
        parts = await stub.GetPartitions(
            pb.GetPartitionsRequest(names=split_list(args.partition)), timeout=30
        )
        nodes = await stub.GetNodes(pb.GetNodesRequest(), timeout=30)
        return parts, nodes

    try:
        parts, nodes = with_controller(body)
    except CliError as exc:
        print(f"sinfo: error: {exc.message}", file=sys.stderr)
        return 1
    by_name = {n.name: n for n in nodes.nodes}
    if args.nodes:
        from spur.core.hostlist import HostlistError, expand

        try:
            wanted = {name for expr in args.nodes for name in expand(expr)}
        except HostlistError as exc:
            print(f"sinfo: error: {exc}", file=sys.stderr)
            return 1
        by_name = {k: v for k, v in by_name.items() if k in wanted}
    states = {s.lower() for s in split_list(args.states)} - {"all"}
    if states:
        by_name = {
            k: v
            for k, v in by_name.items()
            if v.state in states or SHORT.get(v.state, "") in states or node_state_short(v) in states
        }
    if args.json:
        sys.stdout.write(sinfo_json(parts.partitions, list(by_name.values())))
        return 0
    if args.list_reasons:
        rows = reason_rows(by_name.values())
        fmt = args.format or REASONS_FORMAT
    else:
        rows = summary_rows(parts.partitions, by_name, args.node_oriented)
        if states or args.nodes:
            rows = [r for r in rows if r.nodes]
        fmt = args.format or default_format(rows, args.node_oriented, args.long)
    spec = parse_format(fmt)
    out = [render_header(spec, HEADERS)] if not args.noheader else []
    if args.long and not args.noheader:  # as Slurm: the date line goes with the header
        out.insert(0, date_line(time.time()))
    out += [render(spec, r.value) for r in rows]
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


# ---- documentation hooks (see spur.cli.main): --help, man page and completion read these.
USAGE = "Usage: sinfo [OPTIONS...]"
OPTION_VALUES = {"states": sorted(STATE_ALIASES - {"?", "reboot^"})}
OPTION_HELP = {
    "noheader": "no headers on output",
    "Node": "Node-centric format",
    "format": "format specification",
    "partition": "report on specific partition",
    "states": "specify the what states of nodes to view",
    "nodes": "report on specific node(s)",
    "long": "long output - displays more information",
    "list-reasons": "list reason nodes are down or drained",
    "summarize": "report state summary only",
    "all": "show all partitions (including hidden and those not accessible)",
    "verbose": "verbosity level",
    "json": "produce JSON output",
}
