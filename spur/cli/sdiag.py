"""``sdiag``: controller statistics in Slurm's layout, plus the accounting storage section.

The header follows Slurm's sdiag (times as ``Thu Dec 03 09:00:00 2026 (1764752400)``); "DBD Agent
queue size" is the accounting outbox depth, as in Slurm it is the records waiting for slurmdbd. The
accounting section says whether PostgreSQL is configured, whether it answers (and the error when it
does not: the URL is shown with its password replaced by ``***``), the schema version and the flush
figures. :func:`diag_text` and :func:`config_rows` are pure; :func:`main` fetches and prints.
"""

from __future__ import annotations

import sys
import time

__all__ = ["accounting_config_rows", "config_rows", "diag_text", "main"]


USAGE = "Usage: sdiag"


def option_docs():  # -> list[OptionDoc]
    from spur.cli.cmdinfo import OptionDoc

    return [OptionDoc("all", "a", help="all statistics (the default: Spur has no others to hide)")]


def _when(ts: float) -> str:
    if not ts:
        return "never"
    return f"{time.strftime('%a %b %d %H:%M:%S %Y', time.localtime(ts))} ({int(ts)})"


def diag_text(d) -> str:
    """sdiag's output for an AccountingDb DiagResponse."""
    stars = "*" * 55
    lines = [
        stars,
        f"sdiag output at {_when(d.now)}",
        f"Data since      {_when(d.server_start_time)}",
        stars,
        "Server thread count:  1",
        "Agent queue size:     0",
        "Agent count:          0",
        "Agent thread count:   0",
        f"DBD Agent queue size: {d.outbox_depth}",
        "",
        f"Jobs submitted: {d.jobs_submitted}",
        f"Jobs started:   {d.jobs_started}",
        f"Jobs completed: {d.jobs_completed}",
        f"Jobs canceled:  {d.jobs_canceled}",
        f"Jobs failed:    {d.jobs_failed}",
        "",
        f"Job states ts:  {_when(d.now)}",
        f"Jobs pending:   {d.jobs_pending}",
        f"Jobs running:   {d.jobs_running}",
        "",
        "Accounting storage (PostgreSQL):",
    ]
    if not d.database_configured:
        lines.append("\tDatabase:          not configured (sacct reads the embedded job history)")
    else:
        lines.append(f"\tDatabase:          {d.database_url}")
        status = d.database_status + (
            f": {d.database_error}" if d.database_error and d.database_status == "unavailable" else ""
        )
        lines.append(f"\tStatus:            {status}")
        lines.append(f"\tSchema version:    {d.schema_version or 'unknown'}")
    lines += [
        f"\tOutbox depth:      {d.outbox_depth}",
        f"\tOutbox dropped:    {d.outbox_dropped}",
    ]
    if d.database_configured:
        last = _when(d.last_flush_time)
        if d.last_flush_time:
            last += f", {d.last_flush_records} records at {d.last_flush_rate:.0f}/s"
        lines += [
            f"\tLast flush:        {last}",
            f"\tRecords flushed:   {d.records_flushed}",
            f"\tFlush errors:      {d.flush_errors}",
        ]
    return "\n".join(lines) + "\n"


def config_rows(d) -> list[tuple[str, str]]:
    """The accounting storage rows of ``scontrol show config`` for a DiagResponse."""
    storage = "accounting_storage/postgresql" if d.database_configured else "accounting_storage/none"
    return [
        ("AccountingStorageLoc", d.database_url or "N/A"),
        ("AccountingStorageOutboxDepth", str(d.outbox_depth)),
        ("AccountingStorageStatus", d.database_status),
        ("AccountingStorageType", storage),
    ]


def _fetch():
    from spur.cli.acctdb_client import acctdb_stub
    from spur.cli.client import with_controller
    from spur.rpc.proto import accounting_db_pb2 as apb

    return with_controller(lambda stub: acctdb_stub(stub).GetDiag(apb.DiagRequest(), timeout=30))


def accounting_config_rows() -> list[tuple[str, str]]:
    """Rows for ``scontrol show config``; none when the controller cannot say (e.g. an older one)."""
    from spur.cli.client import CliError

    try:
        return config_rows(_fetch())
    except CliError:
        return []


def main(argv: list[str]) -> int:
    from spur.cli.client import CliError

    if argv[:1] and argv[0] in ("--help", "-h", "--usage", "-V", "--version"):
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("diag", "--help" if argv[0] == "-h" else argv[0])
    for arg in argv:
        if arg not in ("-a", "--all"):
            print(f"sdiag: unrecognized option '{arg}'", file=sys.stderr)
            return 1
    try:
        d = _fetch()
    except CliError as exc:
        print(f"sdiag: error: {exc.message}", file=sys.stderr)
        return 1
    sys.stdout.write(diag_text(d))
    return 0
