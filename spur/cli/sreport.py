"""``sreport``: usage reports from the accounting database, in Slurm's layouts.

Supported: ``sreport [-n] [-p|-P] [-t minutes|hours|seconds|percent] cluster utilization [start=..]
[end=..] [format=..]`` and ``sreport ... user top [start=..] [end=..] [topcount=N] [users=..]
[accounts=..] [format=..]``. Usage comes from the hourly usage rows in PostgreSQL (cpu-seconds per
account and user), served by the controller; without a database sreport says so and exits 1.

As in Slurm, the period defaults to yesterday 00:00 to today 00:00, times are cut to the hour and the
header shows the end minus one second. An end in the future stops after the current hour.
Formatting is pure (:func:`utilization_text`, :func:`user_top_text`); :func:`main` fetches and prints.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from spur.cli.sacct import Column, render_table

__all__ = [
    "ReportArgs",
    "SreportError",
    "parse_args",
    "report_period",
    "user_top_text",
    "utilization_text",
    "main",
]

RULE = "-" * 80
UTILIZATION_FIELDS = {
    "cluster": ("Cluster", 9),
    "allocated": ("Allocated", 12),
    "down": ("Down", 10),
    "plnddown": ("PLND Down", 10),
    "planneddown": ("PLND Down", 10),
    "idle": ("Idle", 12),
    "planned": ("Planned", 9),
    "reserved": ("Planned", 9),
    "reported": ("Reported", 12),
}
USER_TOP_FIELDS = {
    "cluster": ("Cluster", 9),
    "login": ("Login", 9),
    "proper": ("Proper Name", 15),
    "account": ("Account", 15),
    "used": ("Used", 10),
    "energy": ("Energy", 10),
}
UTILIZATION_DEFAULT = "Cluster,Allocated,Down,PLNDDown,Idle,Planned,Reported"
USER_TOP_DEFAULT = "Cluster,Login,Proper,Account,Used,Energy"
TIME_FORMATS = {
    "seconds": ("Seconds", 1),
    "minutes": ("Minutes", 60),
    "hours": ("Hours", 3600),
    "percent": ("Percentage of Total", 0),
}


USAGE = """Usage: sreport [OPTIONS...] cluster|user utilization|top [start=T] [end=T] [format=F] [topcount=N]
       sreport [OPTIONS...] cluster utilization [start=T] [end=T] [format=F]
       sreport [OPTIONS...] user top [start=T] [end=T] [topcount=N] [users=U,..] [accounts=A,..] [format=F]"""
SUBCOMMANDS = {
    "cluster utilization": "allocated, down, idle and reported CPU time of the cluster in the period",
    "user top": "the users (per account) who used the most CPU time in the period",
}
OPTION_VALUES = {"time-format": list(TIME_FORMATS)}


def option_docs():  # -> list[OptionDoc]
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc("noheader", "n", help="do not print the header lines"),
        OptionDoc("parsable", "p", help="'|' delimited output with a trailing '|'"),
        OptionDoc("parsable2", "P", help="'|' delimited output without a trailing '|'"),
        OptionDoc(
            "time-format",
            "t",
            "required",
            "FORMAT",
            "minutes (default), hours, seconds or percent",
            choices=tuple(TIME_FORMATS),
        ),
    ]


class SreportError(ValueError):
    """A bad sreport argument; the message is what sreport prints."""


@dataclass
class ReportArgs:
    report: str  # "utilization" or "top"
    start: float
    end: float
    header: bool = True
    parsable: str | None = None
    time_format: str = "minutes"
    fmt: str = ""
    top_count: int = 10
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()


def _hour(ts: float) -> float:
    dt = datetime.fromtimestamp(ts)
    return dt.replace(minute=0, second=0, microsecond=0).timestamp()


def report_period(start: float | None, end: float | None, now: float) -> tuple[float, float]:
    """Slurm's slurmdb_report_set_start_end_time: defaults, hour truncation, no end in the future."""
    today = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    s = start if start is not None else (today - timedelta(days=1)).timestamp()
    e = end if end is not None else today.timestamp()
    s, e = _hour(s), _hour(e)
    # Usage rows are written when a job's record is stored (no hourly rollup to wait for), so an end
    # in the future includes the current, partial hour (Slurm stops at the last complete hour).
    e = min(e, _hour(now) + 3600)
    if s >= e:
        s = e - 3600
    return s, e


def parse_args(argv: list[str], now: float) -> ReportArgs:
    """Options, then ``cluster utilization`` or ``user top``, then ``key=value`` conditions."""
    from spur.core.timespec import TimeSpecError, parse_begin_time

    header, parsable, time_format = True, None, "minutes"
    words: list[str] = []
    expanded: list[str] = []
    for arg in argv:  # -nP -> -n -P
        if len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and set(arg[1:]) <= set("nPpaQ"):
            expanded.extend(f"-{ch}" for ch in arg[1:])
        else:
            expanded.append(arg)
    it = iter(expanded)
    for arg in it:
        if arg in ("-n", "--noheader"):
            header = False
        elif arg in ("-P", "--parsable2"):
            parsable = "plain"
        elif arg in ("-p", "--parsable"):
            parsable = "trailing"
        elif arg in ("-t",) or arg.startswith("-t") or arg.startswith("--time-format"):
            value = (
                arg[2:]
                if arg.startswith("-t") and len(arg) > 2
                else (arg.split("=", 1)[1] if "=" in arg else next(it, ""))
            )
            match = [k for k in TIME_FORMATS if value and k.startswith(value.lower())]
            if not match:
                raise SreportError(f"unknown time format {value}")
            time_format = match[0]
        elif arg.startswith("-") and arg not in ("-a", "--all_clusters", "-Q", "--quiet"):
            raise SreportError(f"sreport: unrecognized option '{arg}'")
        elif not arg.startswith("-"):
            words.append(arg)
    if len(words) < 2:
        raise SreportError("sreport: no report given: use 'cluster utilization' or 'user top'")
    entity, report = words[0].lower(), words[1].lower()
    if entity.startswith("clu") and report.startswith("util"):
        kind = "utilization"
    elif entity.startswith("user") and report.startswith("top"):
        kind = "top"
    else:
        raise SreportError(
            f" Not valid report {words[0]} {words[1]}\n Valid cluster reports are Utilization; valid user reports are TopUsage"
        )
    start = end = None
    out = ReportArgs(kind, 0.0, 0.0, header=header, parsable=parsable, time_format=time_format)
    for cond in words[2:]:
        key, eq, value = cond.partition("=")
        key = key.lower()
        if not eq:
            raise SreportError(f" Unknown condition: {cond}")
        try:
            if key in ("start", "s"):
                start = parse_begin_time(value, now, past=True)
            elif key in ("end", "e"):
                end = parse_begin_time(value, now, past=True)
            elif key.startswith("form"):
                out.fmt = value
            elif key.startswith("topc") and kind == "top":
                if not value.isdigit() or int(value) < 1:
                    raise SreportError(f" Invalid TopCount: {value}")
                out.top_count = int(value)
            elif key.startswith("user") and kind == "top":
                out.users = tuple(v for v in value.split(",") if v)
            elif key.startswith("acc") and kind == "top":
                out.accounts = tuple(v for v in value.split(",") if v)
            elif key.startswith("clu"):
                continue
            else:
                raise SreportError(f" Unknown condition: {cond}")
        except TimeSpecError:
            raise SreportError(f" Invalid time specification: {value}") from None
    out.start, out.end = report_period(start, end, now)
    return out


def _columns(fmt: str, table: dict[str, tuple[str, int]]) -> list[Column]:
    cols = []
    for item in fmt.split(","):
        name, _pct, width = item.strip().partition("%")
        if not name:
            continue
        key = name.lower()
        match = table.get(key) or next((v for k, v in table.items() if k.startswith(key)), None)
        if match is None:
            raise SreportError(f" Unknown field '{name}'")
        cols.append(Column(match[0], int(width) if width.isdigit() and int(width) else match[1]))
    return cols


def _amount(seconds: float, total: float, time_format: str) -> str:
    if time_format == "percent":
        return f"{100.0 * seconds / total:.2f}%" if total else "0.00%"
    return str(int(seconds // TIME_FORMATS[time_format][1]))


def _header(title: str, args: ReportArgs) -> str:
    from spur.core.timespec import format_timestamp

    unit = TIME_FORMATS[args.time_format][0]
    usage = f"Usage reported in {unit}" if args.time_format == "percent" else f"Usage reported in CPU {unit}"
    return f"{RULE}\n{title} {format_timestamp(args.start)} - {format_timestamp(args.end - 1)}{{secs}}\n{usage}\n{RULE}\n"


def _widen(cols: list[Column], rows: list[dict[str, str]], names: tuple[str, ...]) -> list[Column]:
    """Slurm widens the usage columns to fit their values."""
    out = []
    for col in cols:
        if col.name in names:
            width = max([abs(col.width)] + [len(r.get(col.name, "")) for r in rows])
            col = Column(col.name, width)
        out.append(col)
    return out


def utilization_text(args: ReportArgs, resp) -> str:
    """``sreport cluster utilization`` from an AccountingDb UsageResponse."""
    cols = _columns(args.fmt or UTILIZATION_DEFAULT, UTILIZATION_FIELDS)
    total = resp.reported_cpu_seconds
    allocated = min(resp.allocated_cpu_seconds, total) if total else resp.allocated_cpu_seconds
    down = resp.down_cpu_seconds
    idle = max(0.0, total - allocated - down)
    values = {
        "Allocated": allocated,
        "Down": down,
        "PLND Down": 0.0,
        "Idle": idle,
        "Planned": 0.0,
        "Reported": total,
    }
    row = {"Cluster": resp.cluster_name}
    for name, secs in values.items():
        row[name] = _amount(secs, total, args.time_format)
    text = ""
    if args.header:
        text = _header("Cluster Utilization", args).replace("{secs}", "")
    cols = _widen(cols, [row], ("Allocated", "Down", "PLND Down", "Idle", "Planned", "Reported"))
    return text + render_table(cols, [row], header=args.header, parsable=args.parsable)


def _proper_name(user: str) -> str:
    import pwd

    try:
        gecos = pwd.getpwnam(user).pw_gecos
    except KeyError:
        return ""
    return gecos.split(",", 1)[0]


def user_top_text(args: ReportArgs, resp) -> str:
    """``sreport user top`` from an AccountingDb UsageResponse (one line per user and account)."""
    cols = _columns(args.fmt or USER_TOP_DEFAULT, USER_TOP_FIELDS)
    total = resp.allocated_cpu_seconds
    rows = [
        {
            "Cluster": resp.cluster_name,
            "Login": u.user,
            "Proper Name": _proper_name(u.user),
            "Account": u.account,
            "Used": _amount(u.cpu_seconds, total, args.time_format),
            "Energy": _amount(0.0, total, args.time_format),
        }
        for u in resp.usage[: args.top_count]
    ]
    text = ""
    if args.header:
        secs = f" ({int(args.end - args.start)} secs)"
        text = _header(f"Top {args.top_count} Users", args).replace("{secs}", secs)
    cols = _widen(cols, rows, ("Used", "Energy"))
    return text + render_table(cols, rows, header=args.header, parsable=args.parsable)


def main(argv: list[str]) -> int:
    from spur.cli.acctdb_client import acctdb_stub, no_database
    from spur.cli.client import CliError, with_controller
    from spur.rpc.proto import accounting_db_pb2 as apb
    from spur.rpc.status import RpcError

    if argv[:1] and argv[0] in ("--help", "-h", "--usage", "-V", "--version"):
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("report", "--help" if argv[0] == "-h" else argv[0])
    now = time.time()
    try:
        args = parse_args(argv, now)
    except SreportError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    req = apb.UsageRequest(
        start_time=args.start, end_time=args.end, users=list(args.users), accounts=list(args.accounts)
    )

    async def body(stub):
        try:
            return await acctdb_stub(stub).GetUsage(req, timeout=30)
        except RpcError as exc:
            if no_database(exc):
                raise CliError(
                    "sreport: error: no accounting database is configured ([accounting] database_url)"
                ) from None
            raise

    try:
        resp = with_controller(body)
    except CliError as exc:
        message = exc.message if exc.message.startswith("sreport:") else f"sreport: error: {exc.message}"
        print(message, file=sys.stderr)
        return 1
    text = utilization_text(args, resp) if args.report == "utilization" else user_top_text(args, resp)
    sys.stdout.write(text)
    return 0
