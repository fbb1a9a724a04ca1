"""``scontrol`` / ``spur show``: show job|node|partition|hostnames|hostlist, update node, ping."""

from __future__ import annotations

import sys
import time

from spur.cli.client import CliError, with_controller

USAGE = """Usage: scontrol <command> [args]
  show job [ID] | show node [NAME] | show partition [NAME] | show controllers
  show config | show cluster
  show hostnames EXPR | show hostlist NAME,...
  update NodeName=LIST State=DRAIN|RESUME|DOWN|UNDRAIN [Reason=TEXT]
  update JobId=ID [TimeLimit=T] [Partition=P] [Priority=N] [Nice=N] [Name=S] [Comment=S]
  hold|uhold|release|requeue|requeuehold|suspend|resume JOB_LIST
  ping | reconfigure | version
  token [username=NAME] [lifespan=SECONDS]
  token revoke ID|TOKEN
"""
JOB_ACTIONS = ("hold", "uhold", "release", "requeue", "requeuehold", "suspend", "resume")


class ScontrolError(ValueError):
    """A bad scontrol argument; the message is the line Slurm prints."""


def parse_job_ref(text: str) -> tuple[int, int | None]:
    """``123`` or ``123_4`` -> (job id, task id or None); raises ScontrolError."""
    base, sep, task = text.strip().partition("_")
    if not base.isdigit() or int(base) == 0 or (sep and not task.isdigit()):
        raise ScontrolError(f"Invalid job id specified: {text}")
    return int(base), (int(task) if sep else None)


def build_update_job(kv: dict[str, str]):  # -> pb.UpdateJobRequest
    """``scontrol update JobId=.. Key=Value ...`` (keys lower-cased) -> UpdateJobRequest."""
    from spur.core.timespec import TimeSpecError, parse_time_limit
    from spur.rpc.proto import spur_pb2 as pb

    kv = dict(kv)
    ref = kv.pop("jobid", None) or kv.pop("job", None)
    if ref is None:
        raise ScontrolError("No job identification provided")
    job_id, task = parse_job_ref(ref)
    req = pb.UpdateJobRequest(job_id=job_id)
    if task is not None:
        req.array_task_id = task
    for key, value in kv.items():
        if key == "timelimit":
            try:
                req.time_limit_secs = parse_time_limit(value)
            except TimeSpecError:
                raise ScontrolError("Invalid TimeLimit value") from None
        elif key == "partition":
            req.partition = value
        elif key in ("priority", "nice"):
            try:
                number = int(value)
            except ValueError:
                raise ScontrolError(f"Invalid {key.capitalize()} value: {value}") from None
            if key == "priority":
                req.priority = number
            else:
                req.nice = number
        elif key in ("name", "jobname"):
            req.name = value
        elif key == "comment":
            req.comment = value
        else:
            raise ScontrolError(f"Update of this parameter is not supported: {key}={value}")
    return req


def job_action_requests(action: str, refs: list[str]) -> list:
    """``scontrol hold 1,2 3_4`` -> one UpdateJobRequest(action=...) per id."""
    from spur.rpc.proto import spur_pb2 as pb

    out = []
    for text in [r for ref in refs for r in ref.split(",") if r]:
        job_id, task = parse_job_ref(text)
        req = pb.UpdateJobRequest(job_id=job_id, action=action)
        if task is not None:
            req.array_task_id = task
        out.append(req)
    if not out:
        raise ScontrolError(f"Invalid job id specified: {action} requires a job id")
    return out


def _err(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


def show_node_text(n, now: float, *, one_liner: bool = False) -> str:
    """``scontrol show node`` record (Slurm 22.05's slurm_sprint_node_table); ``one_liner``: ``-o``."""
    from spur.cli.jobfields import record_text
    from spur.core.timespec import format_timestamp

    gres = ",".join(f"gpu:{g.model}:1" if g.model else "gpu:1" for g in n.gpus[:1])
    if n.gpus:
        models = {g.model for g in n.gpus}
        gres = (
            f"gpu:{models.pop()}:{len(n.gpus)}"
            if len(models) == 1 and "" not in models
            else f"gpu:{len(n.gpus)}"
        )
    state = n.state.upper()
    if n.state == "draining":
        state = "MIXED+DRAIN" if n.alloc_cpus < n.cpus else "ALLOCATED+DRAIN"
    elif n.state == "drained":
        state = "IDLE+DRAIN"
    elif n.state == "down" and n.reason == "Not responding":
        state = "DOWN+NOT_RESPONDING"
    lines = [
        f"NodeName={n.name} Arch={n.arch or 'x86_64'} CoresPerSocket={n.cores_per_socket} ",
        f"CPUAlloc={n.alloc_cpus} CPUEfctv={n.cpus} CPUTot={n.cpus} CPULoad=0.00",
        f"AvailableFeatures={','.join(n.features) or '(null)'}",
        f"ActiveFeatures={','.join(n.features) or '(null)'}",
        f"Gres={gres or '(null)'}",
        f"NodeAddr={n.address} NodeHostName={n.name} Version={n.version or 'spur'}",
        f"OS={n.os} ",
        f"RealMemory={n.memory_mb} AllocMem={n.alloc_mem_mb} FreeMem=N/A Sockets={n.sockets} Boards=1",
        f"State={state} ThreadsPerCore={n.threads_per_core} TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        f"Partitions={','.join(n.partitions)} ",
        f"BootTime={format_timestamp(n.boot_time) if n.boot_time else 'None'} "
        f"SlurmdStartTime={format_timestamp(n.registered_time)}",
        f"CfgTRES=cpu={n.cpus},mem={n.memory_mb}M,billing={n.cpus}"
        + (f",gres/gpu={len(n.gpus)}" if n.gpus else ""),
        f"AllocTRES={'cpu=' + str(n.alloc_cpus) if n.alloc_cpus else ''}",
    ]
    if n.comment:
        lines.append(f"   Comment={n.comment}")
    if n.reason:
        lines.append(f"Reason={n.reason}")
    return record_text(lines, one_liner)


def show_partition_text(p, nodes_by_name, *, one_liner: bool = False) -> str:
    """``scontrol show partition`` record (Slurm 22.05's slurm_sprint_partition_info); ``one_liner``: ``-o``."""
    from spur.cli.jobfields import format_time_limit_long, record_text

    members = [nodes_by_name[n] for n in p.nodes if n in nodes_by_name]
    cpus = sum(n.cpus for n in members)
    mem = sum(n.memory_mb for n in members)
    from spur.core.hostlist import compress

    default_time = "NONE" if p.default_time_secs < 0 else format_time_limit_long(p.default_time_secs)
    return record_text(
        [
            f"PartitionName={p.name}",
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
            f"AllocNodes=ALL Default={'YES' if p.is_default else 'NO'} QoS=N/A",
            f"DefaultTime={default_time} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
            f"MaxNodes=UNLIMITED MaxTime={format_time_limit_long(p.max_time_secs)} MinNodes=0 LLN=NO "
            "MaxCPUsPerNode=UNLIMITED",
            f"Nodes={compress(p.nodes) if p.nodes else '(null)'}",
            "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO",
            "OverTimeLimit=NONE PreemptMode=OFF",
            f"State={p.state} TotalCPUs={cpus} TotalNodes={len(members)} SelectTypeParameters=NONE",
            "JobDefaults=(null)",
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
            f"TRES=cpu={cpus},mem={mem}M,node={len(members)},billing={cpus}",
        ],
        one_liner,
    )


def show_config_text(info, now: float, extra: list[tuple[str, str]] | None = None) -> str:
    """``scontrol show config`` (the keys Spur has): Slurm's ``Key = value`` lines, key padded to 23,
    sorted by key; ``extra`` adds rows (the accounting storage ones)."""
    rows = [
        ("ClusterId", info.cluster_id or "(null)"),
        ("ClusterName", info.cluster_name or "(null)"),
        ("SlurmctldAddr", info.leader_address or info.address or "(null)"),
    ]
    rows = sorted(rows + list(extra or []))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    return f"Configuration data as of {stamp}\n" + "".join(f"{k:<23} = {v}\n" for k, v in rows)


async def _status_and_config(stub):  # -> (ControllerInfo, [(key, value)])
    """The answering controller's status and the configuration it runs with (no rows from a
    controller without the ConfigReport service)."""
    from spur.cli.client import service_stub
    from spur.rpc.proto import config_report_pb2 as cpb
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError, StatusCode

    info = await stub.GetControllerStatus(pb.Empty(), timeout=10)
    report = service_stub(stub, cpb.DESCRIPTOR.services_by_name["ConfigReport"])
    try:
        eff = await report.GetEffectiveConfig(cpb.EffectiveConfigRequest(), timeout=10)
    except RpcError as exc:
        if exc.code is not StatusCode.UNIMPLEMENTED:
            raise
        return info, []
    return info, [(r.key, r.value) for r in eff.rows]


def show_cluster_text(info) -> str:
    """``spur show cluster``: the cluster's identity, one ``Key=value`` line like ``show job``."""
    leader = info.leader_address or info.address
    return f"ClusterId={info.cluster_id or '(null)'} ClusterName={info.cluster_name} Leader={leader}\n"


def parse_key_values(tokens: list[str]) -> dict[str, str]:
    out = {}
    for tok in tokens:
        if "=" not in tok:
            raise ValueError(f"Invalid input: {tok}")
        k, v = tok.split("=", 1)
        out[k.lower()] = v
    return out


SUBCOMMANDS = {
    "show": "show job|node|partition|controllers|hostnames|hostlist [NAME]",
    "update": "update NodeName=LIST State=... or JobId=ID Key=Value...",
    "delete": "delete NodeName=LIST: remove nodes from the inventory (administrators)",
    "hold": "prevent the listed pending jobs from being started",
    "uhold": "hold jobs (user hold: the owner may release it)",
    "release": "release held jobs",
    "requeue": "requeue batch jobs",
    "requeuehold": "requeue batch jobs and hold them",
    "suspend": "suspend running jobs (administrators)",
    "resume": "resume suspended jobs (administrators)",
    "ping": "report the state of the controllers",
    "reconfigure": "make the controller re-read its configuration file",
    "version": "print the version",
}
SHOW_ENTITIES = ("job", "node", "partition", "controllers", "hostnames", "hostlist")
META_FLAGS = ("-h", "--help", "--usage", "-V", "--version")


def option_docs():  # -> list[OptionDoc]
    """scontrol's options besides its commands (documentation hook, see spur.cli.main)."""
    from spur.cli.cmdinfo import OptionDoc

    return [OptionDoc("oneliner", "o", help="print information one line per record")]


ONELINER_FLAGS = ("-o", "--oneliner")


def split_oneliner(argv: list[str]) -> tuple[bool, list[str]]:
    """Take ``-o``/``--oneliner`` out of ``argv`` wherever it stands (scontrol's getopt permutes its
    arguments, so ``scontrol show job 5 -o`` counts too; nothing after ``--`` is an option)."""
    end = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:end] if a not in ONELINER_FLAGS]
    return len(head) < end, head + argv[end + 1 :]


def main(argv: list[str]) -> int:
    one_liner, argv = split_oneliner(argv)
    meta = next((a for a in argv if a in META_FLAGS), None)
    if not argv or argv[0] == "help" or meta is not None:
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("show", "--help" if meta in (None, "-h") else meta)
    if argv[0].startswith("-"):
        print(f"scontrol: unrecognized option '{argv[0]}'", file=sys.stderr)
        print('Try "scontrol --help" for more information', file=sys.stderr)
        return 1
    cmd, rest = argv[0].lower(), argv[1:]
    if cmd == "version":
        from spur.version import version_line

        print(version_line())
        return 0
    if cmd == "show":
        return show(rest, one_liner=one_liner)
    if cmd == "update":
        return update(rest)
    if cmd == "delete":
        return delete(rest)
    if cmd == "ping":
        return ping()
    if cmd == "reconfigure":
        return reconfigure()
    if cmd in JOB_ACTIONS:
        return job_action(cmd, rest)
    if cmd == "token":
        from spur.cli.token import scontrol_token

        return scontrol_token(rest)
    return _err(f"invalid keyword: {argv[0]}")


def delete(rest: list[str]) -> int:
    """``scontrol delete NodeName=LIST``: take nodes out of the inventory (spur.controller.inventory)."""
    from spur.rpc.proto import inventory_pb2

    key, _, value = (rest[0] if len(rest) == 1 else "").partition("=")
    if key.lower() != "nodename" or not value:
        return _err("scontrol: error: delete takes one NodeName=LIST")

    async def body(stub):
        from spur.cli.client import service_stub

        inventory = service_stub(stub, inventory_pb2.DESCRIPTOR.services_by_name["Inventory"])
        return await inventory.RemoveNodes(inventory_pb2.RemoveNodesRequest(nodes=value), timeout=30)

    try:
        with_controller(body)
    except CliError as exc:
        return _err(f"delete_node error: {exc.message}")
    return 0


def reconfigure() -> int:
    """Ask the leader to re-read its config file and apply the live sections."""
    from spur.rpc.proto import spur_pb2 as pb

    try:
        resp = with_controller(lambda stub: stub.Reconfigure(pb.Empty(), timeout=30))
    except CliError as exc:
        return _err(f"slurm_reconfigure error: {exc.message}")
    for line in reconfigure_lines(resp):
        print(line)
    return 0


def reconfigure_lines(resp) -> list[str]:  # resp: spur_pb2.ReconfigureResponse
    """What ``scontrol reconfigure`` prints: who applied what, that a follower forwarded it to the
    leader (reconfigure runs there only), and the changed keys that need a restart."""
    lines = []
    if resp.received_by and resp.received_by != resp.node_id:
        lines.append(
            f"reconfigure runs on the leader only: controller {resp.received_by} forwarded it to "
            f"controller {resp.node_id} (leader); controller {resp.received_by} keeps the configuration "
            "it read until it restarts or leads"
        )
    lines.append(f"reconfigured by controller {resp.node_id}: {', '.join(resp.applied)}")
    if resp.not_applied:
        lines.append(f"not applied until a restart: {', '.join(resp.not_applied)}")
    return lines


def show(rest: list[str], *, one_liner: bool = False) -> int:
    """``scontrol show ENTITY [NAME]``; ``one_liner`` (``-o``) prints each job, node and partition
    record on one line (Slurm ignores it for the other entities, so does this)."""
    from spur.core.hostlist import HostlistError, compress, expand

    if not rest:
        return _err("scontrol: error: show requires an entity (job, node, partition, hostnames, hostlist)")
    what, arg = rest[0].lower(), (rest[1] if len(rest) > 1 else "")
    try:
        if what == "hostnames":
            # Slurm: with no list, the allocation's (MPI launchers call it inside jobs this way).
            import os

            for name in expand(arg or os.environ.get("SLURM_JOB_NODELIST", "")):
                print(name)
            return 0
        if what == "hostlist":
            print(compress([n for n in arg.split(",") if n]))
            return 0
    except HostlistError as exc:
        return _err(f"scontrol: error: {exc}")
    now = time.time()
    if what not in ("job", "jobs"):  # jobs are read through spur.rpc.lite, without protobuf
        from spur.rpc.proto import spur_pb2 as pb
    try:
        if what in ("job", "jobs"):
            from spur.cli.jobfields import scontrol_job
            from spur.core.array_rows import has_task

            ids: list[int] = []
            task = None
            if arg:
                try:
                    job_id, task = parse_job_ref(arg)
                except ScontrolError:
                    return _err("scontrol_print_job error: Invalid job id specified")
                ids = [job_id]
            from spur.rpc import lite

            resp = with_controller(
                lambda stub: stub.GetJobs(lite.GetJobsRequest(job_ids=ids, include_finished=True), timeout=30),
                lite=True,
            )
            jobs = list(resp.jobs)
            if task is not None:
                jobs = [
                    j for j in jobs if has_task(j) and j.array_job_id == ids[0] and j.array_task_id == task
                ]
            if ids and not jobs:
                return _err("slurm_load_jobs error: Invalid job id specified")
            if not jobs:
                print("No jobs in the system")
            for job in sorted(jobs, key=lambda j: j.job_id):
                sys.stdout.write(scontrol_job(job, now, one_liner=one_liner))
            return 0
        if what in ("node", "nodes"):
            try:
                resp = with_controller(
                    lambda stub: stub.GetNodes(pb.GetNodesRequest(names=[arg] if arg else []), timeout=30)
                )
            except CliError as exc:
                if "not found" in exc.message:
                    print(f"Node {arg} not found")  # Slurm prints it on stdout
                    return 1
                return _err(exc.message)
            for n in resp.nodes:
                sys.stdout.write(show_node_text(n, now, one_liner=one_liner))
            return 0
        if what in ("controllers", "controller"):
            return ping()
        if what in ("config", "cluster"):
            if what == "config":
                from spur.cli.sdiag import accounting_config_rows

                info, rows = with_controller(_status_and_config)
                sys.stdout.write(show_config_text(info, now, rows + accounting_config_rows()))
                return 0
            info = with_controller(lambda stub: stub.GetControllerStatus(pb.Empty(), timeout=10))
            sys.stdout.write(show_cluster_text(info))
            return 0
        if what in ("partition", "partitions"):

            async def body(stub):
                parts = await stub.GetPartitions(
                    pb.GetPartitionsRequest(names=[arg] if arg else []), timeout=30
                )
                return parts, await stub.GetNodes(pb.GetNodesRequest(), timeout=30)

            try:
                parts, nodes = with_controller(body)
            except CliError as exc:
                if "not found" in exc.message:
                    print(f"Partition {arg} not found")  # Slurm prints it on stdout
                    return 1
                return _err(exc.message)
            by_name = {n.name: n for n in nodes.nodes}
            for p in parts.partitions:
                sys.stdout.write(show_partition_text(p, by_name, one_liner=one_liner))
            return 0
    except CliError as exc:
        return _err(f"scontrol: error: {exc.message}")
    return _err(f"invalid entity: {rest[0]} for keyword: show")


def update(rest: list[str]) -> int:
    from spur.rpc.proto import spur_pb2 as pb

    try:
        kv = parse_key_values(rest)
    except ValueError as exc:
        return _err(f"scontrol: error: {exc}")
    if "jobid" in kv or "job" in kv:
        return update_job(kv, rest)
    nodes = kv.get("nodename") or kv.get("node")
    if not nodes:
        return _err("scontrol: error: update requires JobId=... or NodeName=...")
    state = kv.get("state", "").upper()
    if not state:
        return _err("scontrol: error: update NodeName requires State=")
    req = pb.UpdateNodeRequest(nodes=nodes, state=state, reason=kv.get("reason", ""))
    try:
        with_controller(lambda stub: stub.UpdateNode(req, timeout=30))
    except CliError as exc:
        return _err(f"slurm_update error: {exc.message}")
    return 0


def update_job(kv: dict[str, str], words: list[str]) -> int:
    """``scontrol update JobId=...``: Slurm's lines, ``REASON for job ID`` for a refusal."""
    try:
        req = build_update_job(kv)
    except ScontrolError as exc:
        text = str(exc)
        if text.startswith("Update of this parameter is not supported: "):
            # Slurm says it without a prefix, with the words as they were typed.
            key = text.split(": ", 1)[1].split("=", 1)[0]
            typed = next((w for w in words if w.split("=", 1)[0].lower() == key), text.split(": ", 1)[1])
            return _err(f"Update of this parameter is not supported: {typed}")
        return _err(f"scontrol: error: {text}")
    try:
        with_controller(lambda stub: stub.UpdateJob(req, timeout=30))
    except CliError as exc:
        shown = f"{req.job_id}_{req.array_task_id}" if req.HasField("array_task_id") else str(req.job_id)
        return _err(f"{exc.message} for job {shown}")
    return 0


def job_action(action: str, refs: list[str]) -> int:
    """hold/uhold/release/requeue/requeuehold/suspend/resume: one UpdateJob per id, Slurm's errors."""
    from spur.rpc.status import RpcError

    try:
        reqs = job_action_requests(action, refs)
    except ScontrolError as exc:
        return _err(str(exc))

    async def body(stub) -> list[str]:
        errors = []
        for req in reqs:
            try:
                await stub.UpdateJob(req, timeout=30)
            except RpcError as exc:
                if exc.code.name == "UNAVAILABLE":
                    raise
                shown = (
                    f"{req.job_id}_{req.array_task_id}" if req.HasField("array_task_id") else str(req.job_id)
                )
                errors.append(f"{exc.message} for job {shown}")
        return errors

    try:
        errors = with_controller(body)
    except CliError as exc:
        return _err(f"scontrol: error: {exc.message}")
    for line in errors:
        print(line, file=sys.stderr)
    return 1 if errors else 0


def ping() -> int:
    from spur.rpc.proto import spur_pb2 as pb

    try:
        resp = with_controller(lambda stub: stub.GetControllers(pb.Empty(), timeout=10))
    except CliError as exc:
        print(f"Slurmctld(primary) at localhost is DOWN ({exc.message})")
        return 1
    for c in resp.controllers:
        if not c.healthy:
            print(f"Slurmctld(node {c.node_id}) at {c.address} is DOWN")
            continue
        print(
            f"Slurmctld({c.role}) at {c.address} is UP  node_id={c.node_id} term={c.term} "
            f"commit={c.commit_index} applied={c.applied_index}"
        )
    return 0 if all(c.healthy for c in resp.controllers) else 1
