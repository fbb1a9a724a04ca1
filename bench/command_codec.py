"""What writing and reading a Raft entry's commands costs, per command, with no I/O around it.

    python -m bench.command_codec [--batch 8] [--repeat 5] [--rounds 2000]

Every command the leader proposes is written once (``spur.state.commands.encode``) and read once on
every follower and on every replay (``decode``); the leader applies these three as proposed
(``commands.APPLIED_AS_PROPOSED``), so ``decode`` is what that saves it per command. This builds
the entries a loaded leader writes for the usual job (a ``SubmitJob`` of a one-line script with its
immediate grant, the ``JobLaunched`` of its launch and the ``JobExited`` of its end), ``--batch``
commands of a kind to an entry, and times:

- ``encode``: what the leader runs (orjson writes the dataclasses itself);
- ``plain form``: the definition it must equal, ``encode_plainly`` (``dumps(to_plain(...))``),
  which ``encode`` falls back to for what orjson refuses or writes with a null;
- ``decode``: reading the entry back into commands.

Prints CPU microseconds per command (the median of ``--repeat`` runs, each ``--rounds`` entries),
and checks that both writers gave the same bytes. Figures only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from spur.core.job import JobSpec, NodeAllocation
from spur.state import commands as c


def _usual_commands(job_id: int) -> dict[str, Any]:
    spec = JobSpec(name=f"job{job_id}", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)
    grant = [NodeAllocation(f"n{job_id % 5000:05d}", 1, 1000, [], 1)]
    return {
        "SubmitJob": c.SubmitJob(spec, "bench", 1000, 1000, "bench", 1.0e9 + job_id, grant, 3),
        "JobLaunched": c.JobLaunched(job_id, 3),
        "JobExited": c.JobExited(job_id, grant[0].node, 0, 0, 1.0e9 + job_id + 1),
    }


def _cpu_us_per_command(fn: Callable[[], object], rounds: int, per_round: int, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        began = time.process_time()
        for _ in range(rounds):
            fn()
        runs.append((time.process_time() - began) / (rounds * per_round) * 1e6)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8, help="commands per entry")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2000, help="entries per timed run")
    args = ap.parse_args(argv)

    jobs = [_usual_commands(i) for i in range(1, args.batch + 1)]
    print(
        f"{'command':<12} {'encode':>10} {'plain form':>12} {'decode':>10}   (CPU us per command, {args.batch} to an entry)"
    )
    for kind in ("SubmitJob", "JobLaunched", "JobExited"):
        entry = c.Batch([job[kind] for job in jobs])
        data = c.encode(entry)
        if data != c.encode_plainly(entry):
            raise SystemExit(f"{kind}: encode and the plain form wrote different bytes")
        if c.decode(data) != entry:
            raise SystemExit(f"{kind}: the entry does not read back as itself")
        writers: tuple[Callable[[], object], ...] = (
            partial(c.encode, entry),
            partial(c.encode_plainly, entry),
            partial(c.decode, data),
        )
        timed = [_cpu_us_per_command(fn, args.rounds, args.batch, args.repeat) for fn in writers]
        print(f"{kind:<12} {timed[0]:>10.2f} {timed[1]:>12.2f} {timed[2]:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
