"""``sshare``: shares, decayed usage and fair-share factors of the association tree.

Columns as Slurm 22.05 prints them; ``-l`` adds NormUsage, LevelFS, GrpTRESMins and TRESRunMins,
``-o`` picks fields, ``-n`` drops the header, ``-P``/``-p`` print parsable output. Without ``-a``
only the caller's own user associations are listed (with every account), as in Slurm; ``-U`` drops
the account lines.
"""

from __future__ import annotations

import sys

from spur.accounting.grammar import Column, render
from spur.cli.acctclient import call_accounting, records
from spur.cli.client import CliError
from spur.cli.scanned_options import UsageError, option_value

FIELDS: dict[str, tuple[str, int, bool]] = {
    "account": ("Account", 20, True),
    "user": ("User", 10, False),
    "rawshares": ("RawShares", 10, False),
    "normshares": ("NormShares", 11, False),
    "rawusage": ("RawUsage", 11, False),
    "normusage": ("NormUsage", 11, False),
    "effectvusage": ("EffectvUsage", 13, False),
    "fairshare": ("FairShare", 10, False),
    "levelfs": ("LevelFS", 10, False),
    "grptresmins": ("GrpTRESMins", 30, False),
    "tresrunmins": ("TRESRunMins", 30, False),
    "partition": ("Partition", 10, False),
}
DEFAULT = ["account", "user", "rawshares", "normshares", "rawusage", "effectvusage", "fairshare"]
LONG = [
    "account",
    "user",
    "rawshares",
    "normshares",
    "rawusage",
    "normusage",
    "effectvusage",
    "fairshare",
    "levelfs",
    "grptresmins",
    "tresrunmins",
]
USAGE = "Usage: sshare [OPTIONS...]"


def option_docs():  # -> list[OptionDoc]
    """The option table behind --help, --usage, man pages and completion."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc("accounts", "A", "required", "ACCOUNTS", "comma separated list of accounts to show"),
        OptionDoc("all", "a", help="list every user, not only the caller"),
        OptionDoc("long", "l", help="long listing (normalized usage, effective usage, GrpTRESMins, ...)"),
        OptionDoc("noheader", "n", help="no header on output"),
        OptionDoc("format", "o", "required", "FIELDS", "comma separated fields, optionally with %WIDTH"),
        OptionDoc("parsable", "p", help="'|' delimited output with a trailing '|'"),
        OptionDoc("parsable2", "P", help="'|' delimited output without a trailing '|'"),
        OptionDoc("users", "u", "required", "USERS", "comma separated list of users to show"),
        OptionDoc("Users", "U", help="display only user information (no account lines)"),
    ]


def users_only(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``-U``: the user associations alone. As in Slurm, whose tree indentation comes from the account
    lines printed above, their Account column is then the bare parent account name."""
    return [dict(r, account=r.get("account", "").lstrip(" ")) for r in rows if r.get("user")]


def columns(spec: str) -> list[Column]:
    """``-o Account,User%12,FairShare`` -> columns; raises UsageError for an unknown field."""
    out = []
    for item in (i.strip() for i in spec.split(",") if i.strip()):
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in FIELDS:
            raise UsageError(f'sshare: error: Invalid field requested: "{name}"')
        header, size, left = FIELDS[key]
        if width:
            if not width.lstrip("-").isdigit():
                raise UsageError(f'sshare: error: Invalid field width: "{item}"')
            left, size = width.startswith("-") or left, int(width.lstrip("-"))
        out.append(Column(key, header, size, left))
    return out


def _value(arg: str, eq: str, inline: str, args: list[str]) -> str:
    return option_value("sshare", arg, eq, inline, args)


def main(argv: list[str]) -> int:
    from spur.auth.identity import current_identity
    from spur.rpc.proto import accounting_pb2 as apb

    all_users = long = noheader = only_users = False
    parsable = 0
    accounts: list[str] = []
    users: list[str] = []
    fmt = ""
    args = list(argv)
    try:
        while args:
            arg = args.pop(0)
            key, eq, inline = arg.partition("=")
            if arg in ("-a", "--all"):
                all_users = True
            elif arg in ("-l", "--long"):
                long = True
            elif arg in ("-U", "--Users"):
                only_users = True
            elif arg in ("-n", "--noheader"):
                noheader = True
            elif arg in ("-P", "--parsable2"):
                parsable = 2
            elif arg in ("-p", "--parsable"):
                parsable = 1
            elif key in ("-A", "--accounts"):
                accounts += [a for a in _value(arg, eq, inline, args).split(",") if a]
            elif key in ("-u", "--users"):
                users += [u for u in _value(arg, eq, inline, args).split(",") if u]
            elif key in ("-o", "--format"):
                fmt = _value(arg, eq, inline, args)
            elif arg in ("-h", "--help", "--usage", "-V", "--version"):
                from spur.cli.cmdinfo import handle_meta

                return handle_meta("shares", "--help" if arg == "-h" else arg)
            else:
                raise UsageError(f"sshare: error: unrecognized option '{arg}'\n{USAGE}")
        cols = columns(fmt) if fmt else columns(",".join(LONG if long else DEFAULT))
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if not users and not all_users:
        users = [current_identity().user]
    try:
        resp = call_accounting(
            "Shares", apb.SharesRequest(accounts=accounts, users=users, all_users=all_users)
        )
    except CliError as exc:
        print(f"sshare: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    rows = records(resp)
    for line in render(users_only(rows) if only_users else rows, cols, noheader=noheader, parsable=parsable):
        print(line)
    return 0
