"""``sacctmgr``: show and change accounts, users, associations, QOS, TRES and clusters.

Parsing and table output are pure (:mod:`spur.accounting.grammar`); the controller applies changes
(administrators only) and returns the lines to print. Changes are committed at once, as with ``-i``
(there is no interactive confirmation). Exit 0 on success, 1 on any refusal ("Nothing new added.",
"Nothing deleted", unknown entity or option, permission denied, ...), like Slurm's sacctmgr.
"""

from __future__ import annotations

import sys

from spur.accounting.grammar import GrammarError, Request, columns_for, parse, render, select
from spur.cli.acctclient import call_accounting, records
from spur.cli.client import CliError

USAGE = """Usage: sacctmgr [OPTIONS...] COMMAND ENTITY [names] [where k=v...] [set k=v...]
  COMMAND: add | modify | delete | show | list
  ENTITY:  account | user | association | qos | tres | cluster
  show options: format=field[%width],...  tree  withassoc (-s)"""


SUBCOMMANDS = {
    "add": "add entities: add account|user|qos|cluster NAMES [key=value...]",
    "modify": "change entities: modify ENTITY where key=value... set key=value...",
    "delete": "remove entities: delete ENTITY where key=value...",
    "show": "list entities: show ENTITY [where key=value...] [format=...] [tree] [withassoc]",
    "list": "same as show",
}


def option_docs():  # -> list[OptionDoc]
    """The option table behind --help, --usage, man pages and completion."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc("immediate", "i", help="commit changes without asking (Spur always does)"),
        OptionDoc("noheader", "n", help="no header on show output"),
        OptionDoc("parsable", "p", help="'|' delimited output with a trailing '|'"),
        OptionDoc("parsable2", "P", help="'|' delimited output without a trailing '|'"),
        OptionDoc("associations", "s", help="show the associations with accounts and users (withassoc)"),
    ]


def _emit(message: str) -> None:
    """Slurm prints its own errors on stderr and its informational refusals on stdout."""
    stream = sys.stderr if message.startswith("sacctmgr:") else sys.stdout
    print(message, file=stream)


def main(argv: list[str]) -> int:
    if not argv:
        print(USAGE)
        return 1
    if argv[0] in ("-h", "--help", "help", "--usage", "-V", "--version"):
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("acct", "--help" if argv[0] in ("-h", "help") else argv[0])
    try:
        req = parse(argv)
    except GrammarError as exc:
        _emit(str(exc))
        return 1
    try:
        if req.op == "show":
            return _show(req)
        return _change(req)
    except GrammarError as exc:
        _emit(str(exc))
        return 1
    except CliError as exc:
        _emit(_restore_indent(exc.message))
        return exc.exit_code


def _restore_indent(message: str) -> str:
    """Slurm indents its refusals by one space; gRPC status messages lose leading blanks in transit."""
    if message.startswith("Unable to contact"):
        return f"sacctmgr: error: {message}"
    if message.startswith(("sacctmgr:", " ")):
        return message
    return " " + message


def _show(req: Request) -> int:
    from spur.rpc.proto import accounting_pb2 as apb

    cols = columns_for(req)
    with_assoc = req.with_assoc or req.entity == "user" and any(c.key == "account" for c in cols)
    resp = call_accounting("Show", apb.AcctShowRequest(entity=req.entity, with_assoc=with_assoc))
    rows = select(records(resp), req)
    for line in render(rows, cols, noheader=req.noheader, parsable=req.parsable, tree=req.tree):
        print(line)
    return 0


def _change(req: Request) -> int:
    from spur.rpc.proto import accounting_pb2 as apb

    resp = call_accounting(
        "Change",
        apb.AcctChangeRequest(
            op=req.op, entity=req.entity, names=req.names, where=req.where, values=req.values
        ),
    )
    for line in resp.lines:
        print(line)
    return 0


def entry() -> None:
    sys.exit(main(sys.argv[1:]))
