"""``sprio``: the multifactor priority of pending jobs and its weighted factors.

Default columns as Slurm 22.05 prints them; ``-l`` the long layout, ``-o`` a format of ``%``
fields (``%.15i %9r %.10Y ...``), ``-h`` no header, ``-n`` normalized factors (0..1) instead of
weighted ones, ``-j``/``-u`` select jobs, ``-w`` prints the configured weights.
"""

from __future__ import annotations

import re
import sys

from spur.accounting.grammar import Column, render
from spur.cli.acctclient import call_accounting, records
from spur.cli.client import CliError
from spur.cli.scanned_options import UsageError, option_value

# %letter -> (record key, normalized key, header)
LETTERS: dict[str, tuple[str, str, str]] = {
    "i": ("jobid", "jobid", "JOBID"),
    "r": ("partition", "partition", "PARTITION"),
    "u": ("user", "user", "USER"),
    "o": ("account", "account", "ACCOUNT"),
    "Y": ("priority", "priority", "PRIORITY"),
    "S": ("site", "site", "SITE"),
    "A": ("age", "n_age", "AGE"),
    "B": ("assoc", "assoc", "ASSOC"),
    "F": ("fairshare", "n_fairshare", "FAIRSHARE"),
    "J": ("jobsize", "n_jobsize", "JOBSIZE"),
    "P": ("partitionprio", "n_partition", "PARTITION"),
    "n": ("qosname", "qosname", "QOSNAME"),
    "Q": ("qos", "n_qos", "QOS"),
    "N": ("nice", "nice", "NICE"),
    "T": ("tres", "tres", "TRES"),
}
DEFAULT = "%.15i %9r %.10Y %.10S %.10A %.10F %.10J %.10P %.10Q"
LONG = "%.15i %9r %.8u %.10o %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10n %.10Q %.6N %.20T"
USAGE = "Usage: sprio [OPTIONS...]"
_ITEM = re.compile(r"%(\.)?(\d*)([A-Za-z])")


OPERANDS = ""


def option_docs():  # -> list[OptionDoc]
    """The option table behind --help, --usage, man pages and completion (``-h`` is --noheader, as in Slurm)."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc("jobs", "j", "required", "JOB_ID_LIST", "comma separated list of jobs to show"),
        OptionDoc("long", "l", help="long report: every factor, TRES and the partition"),
        OptionDoc("noheader", "h", help="no header on output"),
        OptionDoc("norm", "n", help="show the normalized factors (0.0-1.0)"),
        OptionDoc("format", "o", "required", "FORMAT", "format of the output (%i %u %Y %A %F %J %P %Q ...)"),
        OptionDoc("user", "u", "required", "USER_LIST", "comma separated list of users to show"),
        OptionDoc("weights", "w", help="show the configured factor weights"),
    ]


def columns(fmt: str, normalized: bool) -> list[Column]:
    out = []
    for dot, width, letter in _ITEM.findall(fmt):
        if letter not in LETTERS:
            raise UsageError(f"sprio: error: Invalid job format specification: %{letter}")
        key, norm_key, header = LETTERS[letter]
        out.append(Column(norm_key if normalized else key, header, int(width or 10), not dot))
    if not out:
        raise UsageError(f"sprio: error: Invalid job format specification: {fmt!r}")
    return out


def _value(arg: str, eq: str, inline: str, args: list[str]) -> str:
    return option_value("sprio", arg, eq, inline, args)


def main(argv: list[str]) -> int:
    from spur.rpc.proto import accounting_pb2 as apb

    long = noheader = normalized = weights = False
    fmt = ""
    job_ids: list[int] = []
    users: list[str] = []
    args = list(argv)
    try:
        while args:
            arg = args.pop(0)
            key, eq, inline = arg.partition("=")
            if arg in ("-l", "--long"):
                long = True
            elif arg in ("-h", "--noheader"):
                noheader = True
            elif arg in ("-n", "--norm"):
                normalized = True
            elif arg in ("-w", "--weights"):
                weights = True
            elif key in ("-j", "--jobs"):
                for item in _value(arg, eq, inline, args).split(","):
                    if not item.strip().isdigit():
                        raise UsageError(f"sprio: error: Invalid job id: {item}")
                    job_ids.append(int(item))
            elif key in ("-u", "--user", "--users"):
                users += [u for u in _value(arg, eq, inline, args).split(",") if u]
            elif key in ("-o", "--format"):
                fmt = _value(arg, eq, inline, args)
            elif arg in ("--help", "--usage", "-V", "--version"):
                from spur.cli.cmdinfo import handle_meta

                return handle_meta("prio", arg)
            else:
                raise UsageError(f"sprio: error: unrecognized option '{arg}'\n{USAGE}")
        cols = columns(fmt or (LONG if long else DEFAULT), normalized)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if weights:
        return _weights(cols, noheader)
    try:
        resp = call_accounting("Priorities", apb.PrioritiesRequest(job_ids=job_ids, users=users))
    except CliError as exc:
        print(f"sprio: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    rows = records(resp)
    if not rows and job_ids:
        print("Unable to find jobs matching user/id(s) specified", file=sys.stderr)
        return 1
    for line in render(rows, cols, noheader=noheader):
        print(line)
    return 0


def _weights(cols: list[Column], noheader: bool) -> int:
    """``sprio -w``: the configured weights, as one "Weights" row."""
    import os

    from spur.accounting.shares import weights_of
    from spur.config import ConfigError, load_config
    from spur.config.model import SpurConfig

    path = os.environ.get("SPUR_CONF") or (
        "/etc/spur/spur.conf" if os.path.exists("/etc/spur/spur.conf") else ""
    )
    try:
        cfg = load_config(path) if path else SpurConfig()
    except ConfigError as exc:
        print(f"sprio: error: {exc}", file=sys.stderr)
        return 1
    w = weights_of(cfg.priority)
    row = {
        "jobid": "Weights",
        "age": str(w.age),
        "fairshare": str(w.fairshare),
        "jobsize": str(w.job_size),
        "partitionprio": str(w.partition),
        "qos": str(w.qos),
    }
    for line in render([row], cols, noheader=noheader):
        print(line)
    return 0
