"""``scancel`` / ``spur cancel``: cancel or signal jobs."""

from __future__ import annotations

import signal as signal_mod
import sys

from spur.cli.client import CliError, with_controller
from spur.cli.slurmargs import SlurmArgParser, split_list


def parse_signal(text: str) -> int:
    """'TERM', 'SIGTERM', '15' -> 15; raises ValueError naming the text."""
    t = text.upper()
    if t.isdigit():
        num = int(t)
        if 0 < num < signal_mod.NSIG:
            return num
    else:
        name = t if t.startswith("SIG") else f"SIG{t}"
        if hasattr(signal_mod.Signals, name):
            return int(signal_mod.Signals[name])
    raise ValueError(f"Invalid signal name/number: {text}")


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser("scancel")
    p.add_argument("job_ids", nargs="*")
    p.add_argument("-s", "--signal")
    p.add_argument("-n", "--name", "--jobname", dest="name")
    p.add_argument("-u", "--user")
    p.add_argument("-p", "--partition")
    p.add_argument("-t", "--state")
    p.add_argument("-b", "--batch", action="store_true")
    p.add_argument("-f", "--full", action="store_true")
    p.add_argument("-Q", "--quiet", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--me", action="store_true")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    try:
        sig = parse_signal(args.signal) if args.signal else 0
        ids = [int(x) for x in split_list(args.job_ids)]
    except ValueError as exc:
        msg = str(exc) if args.signal and "signal" in str(exc) else f"Invalid job id {' '.join(args.job_ids)}"
        print(f"scancel: error: {msg}", file=sys.stderr)
        return 1
    filters = any([args.name, args.user, args.partition, args.state, args.me])
    if not ids and not filters:
        print("scancel: error: No job identification provided", file=sys.stderr)
        return 1

    async def body(stub) -> int:
        targets = ids
        if filters:
            users = [args.user] if args.user else []
            if args.me:
                from spur.auth.identity import current_identity

                users.append(current_identity().user)
            resp = await stub.GetJobs(
                pb.GetJobsRequest(
                    job_ids=ids,
                    users=users,
                    partitions=[args.partition] if args.partition else [],
                    states=[args.state] if args.state else [],
                ),
                timeout=30,
            )
            targets = [
                j.job_id
                for j in resp.jobs
                if not j.state.endswith("ED")
                and j.state not in ("TIMEOUT", "NODE_FAIL", "FAILED")
                and (not args.name or j.spec.name == args.name)
            ]
        rc = 0
        for job_id in targets:
            try:
                await stub.CancelJob(pb.CancelJobRequest(job_id=job_id, signal=sig), timeout=30)
            except RpcError as exc:
                if exc.code.name == "NOT_FOUND":
                    continue  # Slurm 22.05: an unknown job id is not an error for scancel
                if not args.quiet:
                    print(
                        f"scancel: error: Kill job error on job id {job_id}: {exc.message}", file=sys.stderr
                    )
                rc = 1
        return rc

    try:
        return with_controller(body)
    except CliError as exc:
        print(f"scancel: error: {exc.message}", file=sys.stderr)
        return 1
