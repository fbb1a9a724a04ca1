"""``squeue`` / ``spur queue``: list jobs in Slurm's layouts (-o, -O, --json), arrays folded as Slurm does."""

from __future__ import annotations

import os
import sys
import time

from spur.cli.client import CliError, with_controller
from spur.cli.formats import FormatError, parse_format, parse_long_format, render_header, render_rows
from spur.cli.jobfields import (
    LONG_STATE,
    SHORT_STATE,
    SQUEUE_DEFAULT_FORMAT,
    SQUEUE_HEADERS,
    SQUEUE_LONG_FIELDS,
    SQUEUE_LONG_FORMAT,
    STATE_ORDER,
    TERMINAL_STATES,
    squeue_value,
)
from spur.cli.optlists import split_list
from spur.core.array_rows import ArrayGroup, group_array_tasks, has_task

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from spur.cli.slurmargs import SlurmArgParser

    class SortedJob(Protocol):
        """What squeue's default order reads of a job (a JobInfo, protobuf's or spur.rpc.lite's)."""

        @property
        def partition(self) -> str: ...
        @property
        def state(self) -> str: ...
        @property
        def priority(self) -> int: ...
        @property
        def job_id(self) -> int: ...

ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETING"})
ALL_STATES = frozenset(STATE_ORDER)


class QueueError(ValueError):
    """A bad squeue argument; the message is the line Slurm prints."""


# The option table: (short or "", long names, dest, kind). Kinds: "flag" (store_true), "value"
# (store), "int" (store, int), "append", "append?" (append, value optional: "" when absent), "count".
OPTIONS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("-h", ("--noheader",), "noheader", "flag"),
    ("-o", ("--format",), "format", "value"),
    ("-O", ("--Format",), "long_format", "value"),
    ("-j", ("--jobs", "--job"), "jobs", "append?"),
    ("-u", ("--user",), "user", "append"),
    ("-t", ("--states",), "states", "append"),
    ("-p", ("--partition",), "partition", "append"),
    ("-n", ("--name",), "name", "append"),
    ("-A", ("--account",), "account", "append"),
    ("-w", ("--nodelist",), "nodelist", "append"),
    ("", ("--me",), "me", "flag"),
    ("-l", ("--long",), "long", "flag"),
    ("-a", ("--all",), "all", "flag"),
    ("-r", ("--array",), "array", "flag"),
    ("-i", ("--iterate",), "iterate", "int"),
    ("-S", ("--sort",), "sort", "value"),
    ("-v", ("--verbose",), "verbose", "count"),
    ("", ("--noconvert",), "noconvert", "flag"),
    ("", ("--local",), "local", "flag"),
    ("", ("--json",), "json", "flag"),
)


def build_parser() -> SlurmArgParser:
    from spur.cli.slurmargs import SlurmArgParser

    p = SlurmArgParser("squeue")
    for short, longs, dest, kind in OPTIONS:
        names = ((short,) if short else ()) + longs
        if kind == "flag":
            p.add_argument(*names, dest=dest, action="store_true")
        elif kind == "value":
            p.add_argument(*names, dest=dest)
        elif kind == "int":
            p.add_argument(*names, dest=dest, type=int)
        elif kind == "append":
            p.add_argument(*names, dest=dest, action="append")
        elif kind == "append?":
            p.add_argument(*names, dest=dest, action="append", nargs="?", const="")
        else:
            p.add_argument(*names, dest=dest, action="count")
    return p


class _Args:
    """The parsed options, one attribute per :data:`OPTIONS` dest: :func:`quick_parse` fills one, and
    argparse fills one too (``parse_args(namespace=...)``), so both paths give the same type."""

    noheader: bool
    format: str | None
    long_format: str | None
    jobs: list[str] | None
    user: list[str] | None
    states: list[str] | None
    partition: list[str] | None
    name: list[str] | None
    account: list[str] | None
    nodelist: list[str] | None
    me: bool
    long: bool
    all: bool
    array: bool
    iterate: int | None
    sort: str | None
    verbose: int | None
    noconvert: bool
    local: bool
    json: bool

    def __init__(self, values: dict[str, object]) -> None:
        self.__dict__.update(values)


def quick_parse(argv: list[str]) -> _Args | None:
    """Parse ``argv`` without argparse (its import and parser construction are a tenth of a
    ``squeue`` call) when every argument is a plain use of :data:`OPTIONS`: ``-o FMT``, ``-oFMT``,
    ``--format FMT``, ``--format=FMT``, single flags. Anything else (bundled short flags, an
    optional value left out, a value that looks like an option, a non-integer ``-i``, --help,
    unknown or abbreviated options, operands) returns None: :func:`build_parser` decides those, and
    its answer is the reference (``tests/test_cli_squeue.py`` checks both agree)."""
    by_name = {}
    values: dict[str, object] = {}
    for short, longs, dest, kind in OPTIONS:
        for name in ((short,) if short else ()) + longs:
            by_name[name] = (dest, kind)
        values[dest] = False if kind == "flag" else None
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
        elif arg.startswith("-") and len(arg) >= 2:
            name, value = arg[:2], arg[2:]
            eq = "=" if value else ""
        else:
            return None
        entry = by_name.get(name)
        if entry is None:
            return None
        dest, kind = entry
        if kind in ("flag", "count"):
            if eq:
                return None
            count = values[dest]  # a count starts as None
            values[dest] = True if kind == "flag" else (count + 1 if isinstance(count, int) else 1)
            continue
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                return None
            value = argv[i]
            i += 1
        if value.startswith("-") and not eq:
            return None
        if kind == "int":
            if not value.strip().lstrip("+-").isdigit():
                return None
            values[dest] = int(value)
        elif kind in ("append", "append?"):
            given = values[dest]  # None until the option's first use
            values[dest] = [*given, value] if isinstance(given, list) else [value]
        else:
            values[dest] = value
    return _Args(values)


def parse_job_filters(values: list[str]) -> list[tuple[int, int | None]]:
    """``218``, ``218_3`` -> (job id, task or None); raises QueueError with Slurm's text."""
    out: list[tuple[int, int | None]] = []
    for text in values:
        base, sep, task = text.partition("_")
        if not base.isdigit() or int(base) <= 0 or (sep and not task.isdigit()):
            raise QueueError(f"squeue: error: Invalid job id: {text}")
        out.append((int(base), int(task) if sep else None))
    return out


def parse_states(values: list[str]) -> set[str] | None:
    """-t values (short or long, any case, or ``all``) -> long state names; None means all."""
    out: set[str] = set()
    for v in values:
        up = v.upper()
        if up == "ALL":
            return None
        name = LONG_STATE.get(up, up)
        if name not in SHORT_STATE:
            raise QueueError(f"squeue: error: Invalid job state specified: {v}")
        out.add(name)
    return out


def job_sort_key(row: tuple[SortedJob, ArrayGroup | None]) -> tuple[str, str, int, int]:
    """Slurm's default sort "P,t,-p": partition, state (by name, as Slurm compares state strings),
    priority descending; then job id."""
    job = row[0]
    return (job.partition, job.state, -job.priority, job.job_id)


DEFAULT_SORT = "P,t,-p"
# -S letters compared as numbers (the rest compare as the text squeue prints).
_NUMERIC_SORT = frozenset("ACDFGQUcpy")


def parse_sort(spec: str) -> list[tuple[str, bool]]:
    """``-S``/``SQUEUE_SORT``: ``[+|-][%]LETTER,...`` -> [(letter, descending)]; QueueError with
    Slurm's line for anything else. Pure."""
    out: list[tuple[str, bool]] = []
    for item in spec.split(","):
        text = item.strip()
        descending = text.startswith("-")
        text = text.lstrip("+-").removeprefix("%")
        if len(text) != 1 or not text.isalpha():
            raise QueueError(f"squeue: error: Invalid sort specification: {item.strip()}")
        out.append((text, descending))
    return out


def sort_rows(rows: list, keys: list[tuple[str, bool]], now: float) -> list:
    """``rows`` ((job, group) pairs, in job id order) sorted by ``keys`` as Slurm's squeue does:
    one stable sort per key, the last key first. Pure."""
    out = sorted(rows, key=lambda r: r[0].job_id)
    for letter, descending in reversed(keys):
        out.sort(key=_sort_key(letter, now), reverse=descending)
    return out


def _sort_key(
    letter: str, now: float
) -> Callable[[tuple[object, ArrayGroup | None]], str | float | tuple[int, int]]:
    """The sort key of one -S letter (a closure: each key keeps its own letter)."""
    return lambda row: _sort_value(row, letter, now)


def _sort_value(row, letter: str, now: float) -> str | float | tuple[int, int]:
    from spur.cli.jobfields import squeue_value

    job, group = row
    if letter in "tT":
        return job.state
    if letter == "i":
        return (job.array_job_id or job.job_id, job.job_id)
    text = squeue_value(job, letter, now, group)
    return _number(text) if letter in _NUMERIC_SORT else text


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def select_jobs(jobs, *, filters, states, names, accounts, nodes) -> list:
    """Client-side filters the controller does not apply (task ids, names, accounts, nodes, states)."""
    out = []
    for job in jobs:
        if filters:
            ok = False
            for jid, task in filters:
                if task is None and (job.job_id == jid or job.array_job_id == jid):
                    ok = True
                elif job.array_job_id == jid and has_task(job) and job.array_task_id == task:
                    ok = True
            if not ok:
                continue
        if states is not None and job.state not in states:
            continue
        if names and job.spec.name not in names:
            continue
        if accounts and job.spec.account not in accounts:
            continue
        if nodes and not {a.node for a in job.allocation} & nodes:
            continue
        out.append(job)
    return out


def format_jobs(
    jobs,
    fmt: str,
    *,
    header: bool,
    now: float,
    expand: bool = False,
    long: bool = False,
    sort: list[tuple[str, bool]] | None = None,
) -> str:
    """Render rows for ``jobs`` with a -o format (``long=False``) or a -O format (``long=True``),
    in Slurm's default order or by ``sort`` (:func:`parse_sort`)."""
    parts = parse_long_format(fmt, SQUEUE_LONG_FIELDS) if long else parse_format(fmt)
    lines = [render_header(parts, SQUEUE_HEADERS)] if header else []
    if sort:
        rows = sort_rows(list(group_array_tasks(jobs, expand=expand)), sort, now)
    else:
        rows = sorted(group_array_tasks(jobs, expand=expand), key=job_sort_key)
    lines += render_rows(parts, rows, lambda row, letter: squeue_value(row[0], letter, now, row[1]))
    return "".join(line + "\n" for line in lines)


def slurm_meta(command: str) -> dict:
    """The ``meta`` object of Slurm 22.05's --json output (data_parser v0.0.38)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("spur")
    except PackageNotFoundError:
        ver = "0"
    return {
        "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"},
        "Spur": {"version": ver, "command": [command]},
    }


def job_json(job, now: float) -> dict:
    """One job as 22.05's ``squeue --json`` prints it (the keys tools read)."""
    from spur.cli.jobfields import (
        command_of,
        num_cpus,
        num_nodes,
        num_tasks,
        stderr_path,
        stdout_path,
        tres_per_node,
    )

    spec = job.spec
    task = job.array_task_id if has_task(job) else None
    limit = None if job.time_limit_secs < 0 else job.time_limit_secs // 60
    return {
        "account": spec.account,
        "accrue_time": int(job.eligible_time),
        "array_job_id": job.array_job_id,
        "array_task_id": task,
        "array_max_tasks": job.array_max_running,
        "array_task_string": "",
        "batch_flag": not spec.interactive,
        "batch_host": job.allocation[0].node if job.allocation else "",
        "command": command_of(job),
        "comment": spec.comment,
        "cpus_per_task": max(1, spec.cpus_per_task),
        "cpus": num_cpus(job),
        "current_working_directory": spec.work_dir,
        "dependency": "" if job.dependency in ("", "(null)") else job.dependency,
        "eligible_time": int(job.eligible_time),
        "end_time": int(job.end_time),
        "excluded_nodes": ",".join(spec.exclude),
        "exit_code": job.exit_code if not job.signal else 128 + job.signal,
        "features": "&".join(spec.constraint),
        "group_id": job.gid,
        "job_id": job.job_id,
        "job_state": job.state,
        "name": spec.name,
        "nice": spec.nice,
        "node_count": num_nodes(job),
        "nodes": job.nodelist,
        "partition": job.partition,
        "priority": job.priority,
        "qos": spec.qos,
        "requeue": not spec.no_requeue,
        "required_nodes": ",".join(spec.nodelist),
        "restart_cnt": job.restarts,
        "standard_error": stderr_path(job) if not spec.interactive else "",
        "standard_input": spec.stdin_path or "/dev/null",
        "standard_output": stdout_path(job) if not spec.interactive else "",
        "start_time": int(job.start_time),
        "state_description": "",
        "state_reason": job.reason or "None",
        "submit_time": int(job.submit_time),
        "suspend_time": int(job.suspend_time),
        "tasks": num_tasks(job),
        "time_limit": limit,
        "tres_per_node": "" if tres_per_node(job) == "N/A" else tres_per_node(job),
        "user_id": job.uid,
        "user_name": job.user,
        "wckey": spec.wckey,
    }


def jobs_json(jobs, now: float) -> str:
    doc = {
        "meta": slurm_meta("squeue"),
        "errors": [],
        "jobs": [job_json(j, now) for j in sorted(jobs, key=lambda j: j.job_id)],
    }
    import json

    return json.dumps(doc, indent=2) + "\n"


def known_long_fields(fmt: str) -> str:
    """``fmt`` (-O) without its unknown field names, each said on stderr: Slurm 22.05's squeue then
    prints the rest (exit 0), arguably a bug that scripts may rely on."""
    kept = []
    for token in fmt.split(","):
        name = token.partition(":")[0]
        if token and name.lower() not in SQUEUE_LONG_FIELDS:
            print(f"squeue: error: Invalid job format specification: {name}", file=sys.stderr)
            continue
        kept.append(token)
    return ",".join(kept)


def _join_sort_values(argv: list[str]) -> list[str]:
    """``-S -i`` -> ``--sort=-i``: getopt gives -S the next argument even when it starts with '-'."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("-S", "--sort") and i + 1 < len(argv):
            out.append(f"--sort={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def main(argv: list[str]) -> int:
    argv = _join_sort_values(argv)
    args = quick_parse(argv) or build_parser().parse_args(argv, namespace=_Args({}))
    from spur.rpc import lite as pb  # the wire without protobuf's start-up cost

    try:
        filters = parse_job_filters(split_list(args.jobs))
        states = parse_states(split_list(args.states))
        nodes: set[str] = set()
        if args.nodelist:
            from spur.core.hostlist import HostlistError, expand

            try:
                nodes = {n for expr in split_list(args.nodelist) for n in expand(expr)}
            except HostlistError as exc:
                raise QueueError(f"squeue: error: {exc}") from None
        long = False
        fmt = args.format
        if args.long_format:
            fmt, long = known_long_fields(args.long_format), True
        elif not fmt:
            env_long = os.environ.get("SQUEUE_FORMAT2")
            if env_long:
                fmt, long = known_long_fields(env_long), True
            else:
                fmt = os.environ.get("SQUEUE_FORMAT") or (
                    SQUEUE_LONG_FORMAT if args.long else SQUEUE_DEFAULT_FORMAT
                )
        sort_spec = args.sort or os.environ.get("SQUEUE_SORT")
        sort = parse_sort(sort_spec) if sort_spec else None
    except (QueueError, FormatError) as exc:
        msg = str(exc)
        print(msg if msg.startswith("squeue:") else f"squeue: error: {msg}", file=sys.stderr)
        return 1
    users = split_list(args.user)
    if args.me:
        from spur.auth.identity import current_identity

        users.append(current_identity().user)
    # Slurm filters by state even with -j: without -t only pending/running/suspended/completing show.
    wanted_states = None if states is None else (states or set(ACTIVE_STATES))
    include_finished = wanted_states is None or bool(wanted_states & TERMINAL_STATES) or bool(filters)
    req = pb.GetJobsRequest(
        job_ids=sorted({jid for jid, _ in filters}),
        users=users,
        partitions=split_list(args.partition),
        include_finished=include_finished,
    )

    async def body(stub):
        return await stub.GetJobs(req, timeout=30)

    import gc

    while True:
        # A listing allocates thousands of objects and no reference cycles: the collector's passes
        # during it (each a scan of every object alive) found nothing and cost ~15% of a call.
        collecting = gc.isenabled()
        gc.disable()
        try:
            try:
                resp = with_controller(body, lite=True)
            except CliError as exc:
                print(f"squeue: error: {exc.message}", file=sys.stderr)
                return 1
            known = select_jobs(
                resp.jobs, filters=filters, states=None, names=set(), accounts=set(), nodes=set()
            )
            jobs = select_jobs(
                known,
                filters=[],
                states=wanted_states,
                names=set(split_list(args.name)),
                accounts=set(split_list(args.account)),
                nodes=nodes,
            )
            if filters and not known and len(filters) == 1:
                print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
                return 1
            now = time.time()
            if args.json:
                sys.stdout.write(jobs_json(jobs, now))
            else:
                if args.iterate or (args.long and not args.noheader):  # Slurm's date line
                    print(time.strftime("%a %b %d %H:%M:%S %Y"))
                sys.stdout.write(
                    format_jobs(
                        jobs, fmt, header=not args.noheader, now=now, expand=args.array, long=long, sort=sort
                    )
                )
            sys.stdout.flush()
            if not args.iterate:
                return 0
        finally:
            if collecting:
                gc.enable()
        time.sleep(args.iterate)


# ---- documentation hooks (see spur.cli.main): --help, man page and completion read these.
USAGE = "Usage: squeue [OPTIONS...]"
OPTION_HELP = {
    "noheader": "no headers on output",
    "format": "format specification (-o '%.18i %.9P %.8j')",
    "Format": "long format specification (-O 'JobID,Name:20')",
    "jobs": "comma separated list of jobs IDs to view, default is all",
    "user": "comma separated list of users to view",
    "states": "comma separated list of states to view, default is pending and running, 'all' reports all",
    "partition": "comma separated list of partitions to view, default is all partitions",
    "name": "comma separated list of job names to view",
    "account": "comma separated list of accounts to view, default is all accounts",
    "nodelist": "list of nodes to view, default is all nodes",
    "me": "equivalent to --user=<my username>",
    "long": "long report",
    "all": "display jobs in hidden partitions",
    "array": "display one job array element per line",
    "iterate": "specify an interation period",
    "sort": "comma separated list of fields to sort on",
    "verbose": "verbosity level",
    "noconvert": "don't convert units from their original type",
    "local": "report information only about jobs on the local cluster",
    "json": "produce JSON output",
}
OPTION_GROUPS: dict[str, str] = {}
OPTION_VALUES = {"states": ["all"] + sorted(STATE_ORDER)}
