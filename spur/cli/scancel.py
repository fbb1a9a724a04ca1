"""``scancel`` / ``spur cancel``: cancel or signal jobs, array tasks and whole arrays.

Ids are ``123`` (a job, or every task of array 123), ``123_4`` (one task) or ``123_[1-3,5]``.
Slurm 22.05 prints nothing and exits 0 for a job id it does not know.
"""

from __future__ import annotations

import re
import signal as signal_mod
import sys

from spur.cli.client import CliError, with_controller
from spur.cli.slurmargs import SlurmArgParser, split_list

_ID = re.compile(r"(\d+)(?:_(\d+|\[[\d,\-]+\]))?(?:\.(\w+))?")


class CancelError(ValueError):
    """A bad scancel argument; the message is the line Slurm prints."""


def parse_signal(text: str) -> int:
    """'TERM', 'SIGTERM', '15' -> 15; raises :class:`CancelError` with Slurm's line (no prefix)."""
    t = text.upper()
    if t.isdigit():
        num = int(t)
        if 0 < num < signal_mod.NSIG:
            return num
    else:
        name = t if t.startswith("SIG") else f"SIG{t}"
        if hasattr(signal_mod.Signals, name):
            return int(signal_mod.Signals[name])
    raise CancelError(f"Unknown job signal: {text}")


def _expand_tasks(text: str, whole: str) -> list[int]:
    if not text.startswith("["):
        return [int(text)]
    out: list[int] = []
    for part in text[1:-1].split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            raise CancelError(f"scancel: error: Invalid job id {whole}")
        out.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    return out


def parse_ids(values: list[str]) -> list[tuple[int, int | None, int | None]]:
    """Command-line ids -> (job or array job id, task id or None, step id or None) per element, in
    order. A step is a number (``12.3``); other step names are refused."""
    out: list[tuple[int, int | None, int | None]] = []
    for text in values:
        m = _ID.fullmatch(text.strip())
        if not m or int(m.group(1)) == 0 or (m.group(3) is not None and not m.group(3).isdigit()):
            raise CancelError(f"scancel: error: Invalid job id {text}")
        job_id = int(m.group(1))
        step = int(m.group(3)) if m.group(3) is not None else None
        if m.group(2) is None:
            out.append((job_id, None, step))
        else:
            out.extend((job_id, t, step) for t in _expand_tasks(m.group(2), text))
    return out


def parse_targets(values: list[str]) -> list[tuple[int, int | None]]:
    """Command-line ids -> (job or array job id, task id or None) per element, in order."""
    return [(job, task) for job, task, _step in parse_ids(values)]


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser("scancel")
    p.add_argument("job_ids", nargs="*")
    p.add_argument("-s", "--signal")
    p.add_argument("-n", "--name", "--jobname", dest="name")
    p.add_argument("-u", "--user")
    p.add_argument("-p", "--partition")
    p.add_argument("-t", "--state")
    p.add_argument("-A", "--account")
    p.add_argument("-w", "--nodelist")
    p.add_argument("-b", "--batch", action="store_true")
    p.add_argument("-f", "--full", action="store_true")
    p.add_argument("-Q", "--quiet", action="store_true")
    p.add_argument("-v", "--verbose", action="count")
    p.add_argument("-i", "--interactive", action="store_true")
    p.add_argument("--me", action="store_true")
    return p


_ACTIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING")


def filter_jobs(jobs, args, targets: list[tuple[int, int | None]]) -> list[tuple[int, int | None]]:
    """With -n/-u/-p/-t/-A: the active jobs matching every filter (and the given ids, if any)."""
    from spur.cli.jobfields import LONG_STATE
    from spur.core.array_rows import has_task

    states = {LONG_STATE.get(s.upper(), s.upper()) for s in split_list([args.state] if args.state else [])}
    out: list[tuple[int, int | None]] = []
    for j in jobs:
        if j.state not in _ACTIVE:
            continue
        if args.name and j.spec.name not in split_list([args.name]):
            continue
        if states and j.state not in states:
            continue
        if args.account and j.spec.account not in split_list([args.account]):
            continue
        if targets and not any(
            (t is None and (j.job_id == jid or j.array_job_id == jid))
            or (t is not None and j.array_job_id == jid and has_task(j) and j.array_task_id == t)
            for jid, t in targets
        ):
            continue
        out.append((j.job_id, None))
    return out


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    try:
        sig = parse_signal(args.signal) if args.signal else 0
        ids = parse_ids(split_list(args.job_ids))
        targets = [(job, task) for job, task, _step in ids]
    except CancelError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"scancel: error: {exc}", file=sys.stderr)
        return 1
    filters = any([args.name, args.user, args.partition, args.state, args.me, args.account])
    if not targets and not filters:
        print("scancel: error: No job identification provided", file=sys.stderr)
        return 1

    async def body(stub) -> int:
        todo: list[tuple[int, int | None, int | None]] = ids
        if filters:
            users = split_list([args.user]) if args.user else []
            if args.me:
                from spur.auth.identity import current_identity

                users.append(current_identity().user)
            resp = await stub.GetJobs(
                pb.GetJobsRequest(
                    job_ids=sorted({jid for jid, _ in targets}),
                    users=users,
                    partitions=split_list([args.partition]) if args.partition else [],
                ),
                timeout=30,
            )
            todo = [(job, task, None) for job, task in filter_jobs(resp.jobs, args, targets)]
        rc = 0
        for job_id, task, step in todo:
            req = pb.CancelJobRequest(job_id=job_id, signal=sig, batch_only=args.batch, full=args.full)
            if task is not None:
                req.array_task_id = task
            if step is not None:
                req.step_id = step
            try:
                await stub.CancelJob(req, timeout=30)
            except RpcError as exc:
                if exc.code.name == "NOT_FOUND":
                    continue  # Slurm 22.05: an unknown job id is not an error for scancel
                shown = (f"{job_id}_{task}" if task is not None else str(job_id)) + (
                    f".{step}" if step is not None else ""
                )
                if not args.quiet:
                    print(f"scancel: error: Kill job error on job id {shown}: {exc.message}", file=sys.stderr)
                rc = 1
        return rc

    try:
        return with_controller(body)
    except CliError as exc:
        print(f"scancel: error: {exc.message}", file=sys.stderr)
        return 1


# ---- documentation hooks (see spur.cli.main): --help, man page and completion read these.
USAGE = "Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]"
OPERANDS = "jobs"
OPTION_VALUES = {"state": ["PENDING", "RUNNING", "SUSPENDED"]}
OPTION_HELP = {
    "signal": "signal to send to job, default is SIGKILL",
    "name": "act only on jobs with this name",
    "user": "name of user to act on jobs of",
    "partition": "name of job's partition",
    "state": "act only on jobs in this state; valid job states are PENDING, RUNNING and SUSPENDED",
    "account": "act only on jobs charging this account",
    "nodelist": "act only on jobs on these nodes",
    "batch": "signal batch shell for specified job",
    "full": "signal all steps including batch shell",
    "quiet": "disable warnings",
    "verbose": "verbosity level",
    "interactive": "require response from user for each job",
    "me": "equivalent to --user=<my username>",
}
