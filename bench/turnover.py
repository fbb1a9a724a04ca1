"""Turnover on one node: from a job's exit to the next job's start on the CPU it freed.

    python -m bench.turnover [--array 200] [--cpus 2] [--runs 1] [--baseline DIR] [--csv FILE]

Starts a real spurctld (scheduler interval 1 s, WAL fsync on, as ``bench.vs_slurm`` runs it) and one
spurd (``--cpus 2``, process backend) on loopback, both with ``SPUR_TRACE=1``, submits one
``sbatch --array=0-<N-1> -c 1 --wrap true`` and waits until no task is pending or running (GetJobs
on one held connection every 0.2 s).

Per slot gap: with C one-CPU slots and every task the same shape, the k-th task to start (k >= C, in
start order) takes the CPU freed by the (k-C+1)-th task to end, so its gap is its start minus that
end. Times come from sub-millisecond sources (``sacct``/``scontrol``/REST print whole seconds):

- a task's end: its ``end_time`` in the controller's record (GetJobs, a double), which is the exit
  time the job's supervisor recorded on the node;
- its allocation: its ``start_time`` in the controller's record (the scheduler pass's StartJob);
- its process start: the agent's ``agent.started`` span (``spur.trace``, in spurd's log).

The gap is split with the spans of both daemons, all on one wall clock: exit -> the agent has the
status (``agent.finished``) -> the controller has the report (``ctl.report-received``) -> the exit is
committed (``ctl.exit-committed``) -> the next task is allocated (its start_time) -> the launch leaves
(``ctl.launch-sent``) -> the task's process runs (``agent.started``). Prints median and p90 of each
part and of the whole gap, and the makespan (sbatch to the last task done).

``--baseline DIR`` runs the same measurement with another checkout's daemons (``PYTHONPATH=DIR`` and
its backfill plugin, same interpreter), alternating with this tree's run by run, so both see the same
machine load. ``--csv`` writes one row per gap. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import controller, median, percentile, print_table
from bench.latency import start_agent
from integration.harness import BIN, wait_for

SPAN = re.compile(r"trace job=(\d+) (\S+) t=([0-9.]+)")
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}
# (label, from, to): the parts of a gap, each from the freeing task's or the next task's records.
PARTS = [
    ("exit -> agent has it", ("prev", "end"), ("prev", "agent.finished")),
    ("agent -> ctl report", ("prev", "agent.finished"), ("prev", "ctl.report-received")),
    ("report -> exit committed", ("prev", "ctl.report-received"), ("prev", "ctl.exit-committed")),
    ("committed -> next allocated", ("prev", "ctl.exit-committed"), ("next", "start")),
    ("allocated -> launch sent", ("next", "start"), ("next", "ctl.launch-sent")),
    ("launch sent -> process started", ("next", "ctl.launch-sent"), ("next", "agent.started")),
]


@dataclass
class RunResult:
    makespan: float
    gaps_alloc: list[float]  # freeing task's end -> next task's allocation
    gaps_start: list[float]  # freeing task's end -> next task's process start
    parts: dict[str, list[float]]
    rows: list[list[object]]


def _spans(*logs: Path) -> dict[int, dict[str, float]]:
    found: dict[int, dict[str, float]] = {}
    for path in logs:
        text = path.read_text(errors="replace") if path.exists() else ""
        for job, name, t in SPAN.findall(text):
            found.setdefault(int(job), {}).setdefault(name, float(t))  # the first of each kind
    return found


def _jobs(address: str) -> list:  # noqa: ANN401 (protobuf JobInfo messages)
    from spur.auth.identity import identity_metadata
    from spur.rpc.blocking import BlockingChannel, blocking_controller_stub, drive
    from spur.rpc.proto import spur_pb2 as pb

    channel = BlockingChannel(address, metadata=identity_metadata())
    stub = blocking_controller_stub(channel)

    async def call():  # noqa: ANN202
        return await stub.GetJobs(pb.GetJobsRequest(), timeout=30)

    return list(drive(call()).jobs)


def analyse(tasks: list, spans: dict[int, dict[str, float]], cpus: int) -> tuple[list[float], list[float], dict[str, list[float]], list[list[object]]]:  # noqa: E501
    """Per-slot gaps of ``tasks`` (JobInfo records, all finished) and the parts of each gap."""
    starts = sorted(tasks, key=lambda j: j.start_time)
    ends = sorted(tasks, key=lambda j: j.end_time)
    gaps_alloc: list[float] = []
    gaps_start: list[float] = []
    parts: dict[str, list[float]] = {label: [] for label, _a, _b in PARTS}
    rows: list[list[object]] = []

    def when(job: object, key: str) -> float | None:
        if key in ("start", "end"):
            return float(getattr(job, f"{key}_time"))
        return spans.get(job.job_id, {}).get(key)  # type: ignore[attr-defined]

    for k in range(cpus, len(starts)):
        nxt, prev = starts[k], ends[k - cpus]
        gap_a = nxt.start_time - prev.end_time
        started = spans.get(nxt.job_id, {}).get("agent.started")
        gap_s = started - prev.end_time if started is not None else None
        gaps_alloc.append(gap_a)
        if gap_s is not None:
            gaps_start.append(gap_s)
        row: list[object] = [prev.job_id, nxt.job_id, round(gap_a * 1000, 2), None if gap_s is None else round(gap_s * 1000, 2)]
        for label, (wa, ka), (wb, kb) in PARTS:
            a = when(prev if wa == "prev" else nxt, ka)
            b = when(prev if wb == "prev" else nxt, kb)
            value = None if a is None or b is None else b - a
            if value is not None:
                parts[label].append(value)
            row.append(None if value is None else round(value * 1000, 2))
        rows.append(row)
    return gaps_alloc, gaps_start, parts, rows


@contextmanager
def _source(tree: Path | None) -> Iterator[None]:
    """Daemons started inside run ``tree``'s code (PYTHONPATH), or this checkout's when None."""
    old = os.environ.get("PYTHONPATH")
    if tree is not None:
        plugin = tree / "plugins" / "spur-sched-backfill"
        os.environ["PYTHONPATH"] = os.pathsep.join([str(tree.resolve()), str(plugin.resolve())])
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def run_once(tasks: int, cpus: int, tree: Path | None, extra: str) -> RunResult:
    os.environ["SPUR_TRACE"] = "1"  # the daemons inherit it
    with _source(tree), controller(wal_fsync=True, scheduler_interval_secs=1.0, extra=extra) as ctl:
        agent = start_agent(ctl, cpus)
        try:
            env = {**os.environ, "SPUR_CONTROLLER": ctl.address}
            env.pop("SPUR_CONF", None)
            env.pop("PYTHONPATH", None)  # the CLI is this tree's in both runs
            work = ctl.root / "work"
            work.mkdir()

            def idle() -> bool:
                out = subprocess.run([str(BIN / "sinfo"), "-h", "-o", "%T"], env=env, capture_output=True, text=True)
                return out.stdout.strip() == "idle"

            wait_for(idle, timeout=60, what="the node to be idle")
            began = time.time()
            cmd = [str(BIN / "sbatch"), "--parsable", f"--array=0-{tasks - 1}", "-c", "1", "-o", "/dev/null", "--wrap", "true"]
            out = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"sbatch exited {out.returncode}: {out.stderr.strip()}")
            array = int(out.stdout.strip().split(";")[0])
            deadline = time.monotonic() + 1800
            while True:
                mine = [j for j in _jobs(ctl.address) if (j.array_job_id or j.job_id) == array]
                if len(mine) >= tasks and not any(j.state in ACTIVE for j in mine):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"array {array} not done after 30 minutes")
                time.sleep(0.2)
            done = [j for j in mine if j.start_time and j.end_time]
            makespan = max(j.end_time for j in done) - began
            spans = _spans(ctl.root / "spurctld.log", ctl.root / "spurd.log")
            gaps_a, gaps_s, parts, rows = analyse(done, spans, cpus)
            return RunResult(makespan, gaps_a, gaps_s, parts, rows)
        finally:
            agent.kill()


def _ms(values: list[float], q: float | None = None) -> str:
    if not values:
        return "-"
    v = median(values) if q is None else percentile(values, q)
    return f"{v * 1000:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.turnover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--array", type=int, default=200, help="tasks in the array")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1, help="runs per tree (alternating with --baseline)")
    ap.add_argument("--baseline", type=Path, help="another checkout, measured in the same run")
    ap.add_argument("--extra", default="", help="more [scheduler] lines for spur.conf")
    ap.add_argument("--csv", type=Path, help="one row per gap")
    args = ap.parse_args(argv)
    trees: dict[str, Path | None] = {"this tree": None}
    if args.baseline:
        trees = {"baseline": args.baseline, "this tree": None}
    results: dict[str, list[RunResult]] = {name: [] for name in trees}
    for run in range(args.runs):
        for name, tree in trees.items():
            print(f"run {run + 1}/{args.runs}: {name} ...", file=sys.stderr, flush=True)
            results[name].append(run_once(args.array, args.cpus, tree, args.extra))
    load = os.getloadavg()
    rows = []
    for name, runs in results.items():
        gaps_a = [g for r in runs for g in r.gaps_alloc]
        gaps_s = [g for r in runs for g in r.gaps_start]
        rows.append(
            [
                name,
                f"{median([r.makespan for r in runs]):.2f}",
                _ms(gaps_s),
                _ms(gaps_s, 0.9),
                _ms(gaps_a),
                _ms(gaps_a, 0.9),
                len(gaps_a),
            ]
        )
    print_table(
        ["daemons", "makespan s (median)", "exit->next process start ms p50", "p90", "exit->next allocation ms p50", "p90", "gaps"],
        rows,
        title=f"{args.array}-task array of true, one node with {args.cpus} CPUs, {args.runs} run(s) each; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    )
    part_rows = []
    for label, _a, _b in PARTS:
        row: list[object] = [label]
        for runs in results.values():
            values = [v for r in runs for v in r.parts[label]]
            row += [_ms(values), _ms(values, 0.9)]
        part_rows.append(row)
    headers = ["part of the gap"]
    for name in results:
        headers += [f"{name} p50 ms", "p90"]
    print_table(headers, part_rows, title="where the gap goes (spans; medians of the parts need not add up)")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["daemons", "run", "freed_by", "next", "gap_alloc_ms", "gap_start_ms"] + [p[0] for p in PARTS])
            for name, runs in results.items():
                for i, r in enumerate(runs):
                    for row_ in r.rows:
                        w.writerow([name, i + 1, *row_])
    return 0


if __name__ == "__main__":
    sys.exit(main())
