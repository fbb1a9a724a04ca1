"""A simulated large cluster against one real controller.

    python -m bench.fleet [--nodes 5000] [--heartbeat 30] [--rate 100] [--duration 60] [--runtime-mean 1]
                          [--rss-jobs 10000] [--no-fsync] [--pin CORE]

Phase 1 (fleet): starts spurctld (node_timeout_secs 90), then ``python -m integration.fleet`` with
``--nodes`` virtual nodes heartbeating every ``--heartbeat`` seconds (spread evenly), waits until all are
registered, and submits a steady ``--rate`` jobs/s for ``--duration`` seconds (each job 1 CPU, run time
exponential with mean ``--runtime-mean``). Reports controller CPU (share of one core, from
/proc/<pid>/stat) and RSS, heartbeat RPC latency as the fleet saw it, nodes the controller holds DOWN
although they kept heartbeating (false DOWN), jobs completed/s and the pending backlog. The full run of
the issue is ``--duration 300``; a false DOWN needs ``node_timeout_secs`` (90 s) without a heartbeat,
so only runs longer than that can show one. ``--pin CORE`` gives the controller a core of its own
(the simulator and the load generator share the others), as a controller on its own host has.

Phase 2 (RSS): a fresh controller (no nodes) takes ``--rss-jobs`` submissions, then half of them are
cancelled (so they move to history); prints RSS empty / all pending / half in history.
``--rss-jobs 100000`` is the issue's figure (takes several minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.common import (
    BenchController,
    Profiler,
    controller,
    percentile,
    print_table,
    proc_cpu_secs,
    sleeps_between,
)
from integration.harness import wait_for
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

SPEC = pb.JobSpec(name="fleet", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)


# With --tls: the benchmark's own client verifies the controller against the run's CA.
_CLIENT_TLS: list[Any] = []


def _tls_setup(root: Path) -> str:
    """A CA and a node certificate for 127.0.0.1 in ``root`` (spur cert); the [tls] section for spurctld."""
    from spur.rpc.certs import ensure_ca, issue
    from spur.rpc.tls import TlsSettings, user_client_tls

    ensure_ca(root, cluster_name="bench")
    issue(root, "node", dns=["localhost"], ips=["127.0.0.1"])
    _CLIENT_TLS[:] = [user_client_tls(TlsSettings(mode="required", ca_file=root / "ca.crt"))]
    return (
        f'[tls]\nmode = "required"\ncert_file = "{root / "node.crt"}"\nkey_file = "{root / "node.key"}"\n'
        f'ca_file = "{root / "ca.crt"}"\n'
    )


class _Client:
    """A few controller channels held for the whole benchmark (round-robin)."""

    def __init__(self, address: str, channels: int = 4) -> None:
        self.address = address
        self.tls = _CLIENT_TLS[0] if _CLIENT_TLS else None
        self.n = channels
        self.stubs: list[Any] = []
        self._i = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        from spur.auth.identity import identity_metadata
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import controller_stub

        md = identity_metadata()
        async with trio.open_nursery() as nursery:

            async def hold(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                async with open_channel(self.address, metadata_provider=lambda: md, tls=self.tls) as ch:
                    self.stubs.append(controller_stub(ch))
                    task_status.started()
                    await trio.sleep_forever()

            for _ in range(self.n):
                await nursery.start(hold)
            task_status.started()

    async def call(self, method: str, request: Any, timeout: float = 60) -> Any:
        stub = self.stubs[self._i % len(self.stubs)]
        self._i += 1
        return await getattr(stub, method)(request, timeout=timeout)


def _fleet_stats(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


async def _workload(ctl: BenchController, args: argparse.Namespace, stats_file: Path) -> dict[str, Any]:
    client = _Client(ctl.address)
    submit_lat: list[float] = []
    submit_errors = 0
    unanswered = 0  # pipelined: still in flight when the window ended (neither failed nor answered yet)
    refused = 0
    samples: list[tuple[float, int, int]] = []  # (t, pending, down)
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)

        async def submit() -> None:
            # A client as Spur's sbatch is: refused with RESOURCE_EXHAUSTED, it backs off and retries.
            nonlocal submit_errors, refused
            for attempt in range(1, 16):
                began = trio.current_time()
                try:
                    await client.call("SubmitJob", pb.SubmitJobRequest(spec=SPEC))
                    submit_lat.append(trio.current_time() - began)
                    return
                except RpcError as exc:
                    if exc.code is not StatusCode.RESOURCE_EXHAUSTED:
                        submit_errors += 1
                        return
                    refused += 1
                    await trio.sleep(attempt * (0.5 + random.random()))
                except Exception:
                    submit_errors += 1
                    return
            submit_errors += 1

        async def sampler() -> None:
            # Sparse on purpose: GetNodes/GetJobs over thousands of records are costly for the controller
            # (GetNodes grows with nodes x partition size), so frequent samples would skew what is measured.
            while True:
                await trio.sleep(args.sample_secs)
                try:
                    jobs = await client.call("GetJobs", pb.GetJobsRequest(states=["PENDING"]))
                    nodes = await client.call("GetNodes", pb.GetNodesRequest())
                except RpcError:  # an overloaded controller may miss a sample; the run goes on
                    continue
                down = sum("down" in n.state.lower() for n in nodes.nodes)
                samples.append((trio.current_time(), len(jobs.jobs), down))

        before = _fleet_stats(stats_file)
        fleet_pid = getattr(args, "fleet_pid", 0)
        fleet_cpu0 = proc_cpu_secs(fleet_pid) if fleet_pid else 0.0
        own_cpu0 = time.process_time()
        cpu0, wall0, sleeps0 = ctl.cpu_secs(), time.monotonic(), ctl.sleeps()
        nursery.start_soon(sampler)
        t0 = trio.current_time()
        total = int(args.rate * args.duration)
        pipelined: dict[str, Any] = {}
        if getattr(args, "loadgen", "pipelined") == "pipelined":
            # bench.submitter in its own process: open loop, a fraction of the trio client's CPU
            argv = [sys.executable, "-m", "bench.submitter", "--address", ctl.address]
            argv += ["--rate", str(args.rate), "--duration", str(args.duration), "--drain", "0"]
            argv += ["--per-call", str(getattr(args, "per_call", 1))]
            done = await trio.run_process(argv, capture_stdout=True, check=True)
            pipelined = json.loads(done.stdout.decode().strip().splitlines()[-1])
        else:
            for i in range(total):
                await trio.sleep_until(t0 + i / args.rate)
                nursery.start_soon(submit)
            await trio.sleep_until(t0 + args.duration)
        cpu1, wall1, sleeps1 = ctl.cpu_secs(), time.monotonic(), ctl.sleeps()
        fleet_cpu = (proc_cpu_secs(fleet_pid) - fleet_cpu0) if fleet_pid else 0.0
        own_cpu = time.process_time() - own_cpu0
        if pipelined:
            own_cpu += pipelined["cpu_s"]
            submit_errors = pipelined["errors"] + pipelined["gave_up"]
            unanswered = pipelined["unanswered"]
            refused = pipelined["refused"]
        after = _fleet_stats(stats_file)
        rss = ctl.rss_mb()
        jobs = (await client.call("GetJobs", pb.GetJobsRequest(include_finished=True))).jobs
        nodes = (await client.call("GetNodes", pb.GetNodesRequest())).nodes
        nursery.cancel_scope.cancel()
    # backlog trend over the last two thirds of the window (jobs/s; about 0 when sustained)
    late = [(t, p) for t, p, _ in samples if t >= t0 + args.duration / 3]
    slope = 0.0
    if len(late) >= 2:
        mt = sum(t for t, _ in late) / len(late)
        mp = sum(p for _, p in late) / len(late)
        var = sum((t - mt) ** 2 for t, _ in late)
        slope = sum((t - mt) * (p - mp) for t, p in late) / var if var else 0.0
    by_state: dict[str, int] = {}
    for j in jobs:
        by_state[j.state] = by_state.get(j.state, 0) + 1
    elapsed = wall1 - wall0
    return {
        "elapsed": elapsed,
        "cpu_share": (cpu1 - cpu0) / elapsed,
        "sleeps_per_s": sleeps_between(sleeps0, sleeps1) / elapsed,
        "fleet_cpu_share": fleet_cpu / elapsed,
        "loadgen_cpu_share": own_cpu / elapsed,
        "rss_mb": rss,
        "submitted": total - submit_errors - unanswered,
        "submit_errors": submit_errors,
        "unanswered": unanswered,
        "refused": refused,
        "submit_p50_ms": pipelined["submit_p50_ms"] if pipelined else 1000 * percentile(submit_lat, 0.5),
        "submit_p99_ms": pipelined["submit_p99_ms"] if pipelined else 1000 * percentile(submit_lat, 0.99),
        "completed_per_s": (after.get("completed", 0) - before.get("completed", 0)) / elapsed,
        "by_state": by_state,
        "backlog_max": max((p for _, p, _ in samples), default=0),
        "backlog_slope": slope,
        "backlog_end": by_state.get("PENDING", 0),
        "down_max": max((d for _, _, d in samples), default=0),
        "down_end": sum("down" in n.state.lower() for n in nodes),
        "nodes": len(nodes),
        "fleet": after,
        "heartbeats_in_window": after.get("heartbeats", 0) - before.get("heartbeats", 0),
    }


def _squeue(address: str) -> list[str]:
    """The lines of a real ``squeue -h`` against the benchmark's controller."""
    env = dict(os.environ, SPUR_CONTROLLER=address)
    env.pop("SPUR_CONF", None)
    out = subprocess.run(
        [str(Path(sys.executable).parent / "squeue"), "-h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout.splitlines()


async def _array_workload(ctl: BenchController, args: argparse.Namespace, stats_file: Path) -> dict[str, Any]:
    """One ``--array 1-N`` job of ``true``: makespan from submission to its last task's report, and what
    ``squeue`` showed meanwhile (one line for all pending tasks, one per running task)."""
    n = args.array
    client = _Client(ctl.address, channels=1)
    views: list[tuple[float, list[str]]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        before = _fleet_stats(stats_file).get("completed", 0)
        cpu0 = ctl.cpu_secs()
        began = time.monotonic()
        spec = pb.JobSpec(name="arr", script="#!/bin/sh\ntrue\n", work_dir="/tmp", array=f"1-{n}")
        job_id = (await client.call("SubmitJob", pb.SubmitJobRequest(spec=spec))).job_id
        done = trio.Event()

        async def watch_squeue() -> None:
            while not done.is_set():
                lines = await trio.to_thread.run_sync(_squeue, ctl.address)
                views.append((time.monotonic() - began, lines))
                await trio.sleep(2)

        nursery.start_soon(watch_squeue)
        while _fleet_stats(stats_file).get("completed", 0) - before < n:
            await trio.sleep(0.2)
            if time.monotonic() - began > 600:
                break
        makespan = time.monotonic() - began
        done.set()
        cpu = ctl.cpu_secs() - cpu0
        nursery.cancel_scope.cancel()
    compact = [(t, len(lines), next((x for x in lines if f"{job_id}_[" in x), "")) for t, lines in views]
    return {
        "job_id": job_id,
        "makespan": makespan,
        "cpu": cpu,
        "views": compact,
        "completed": _fleet_stats(stats_file).get("completed", 0) - before,
    }


def sustained(offered: float, completed: float, slope: float, refused: int) -> bool:
    """Whether a window kept up with its offered rate: no submission refused, the pending backlog flat
    (growing by less than 2% of the offered rate per second) and at least 90% of the offered rate
    completed (not 100%: jobs still running at the window's end, a second's worth on average with
    the default run time, were accepted but have not completed yet)."""
    return completed >= 0.9 * offered and slope < 0.02 * offered and refused == 0


def sweep(ctl: BenchController, args: argparse.Namespace, stats_file: Path) -> None:
    """Steady windows of ``--duration`` s at each offered rate of ``--rates``, one after another on the
    same controller and fleet; prints (and with ``--csv`` writes) one row per rate.

    With ``--find-limit`` the rates are a ladder climbed until the first window that is not
    :func:`sustained`; the highest sustained rate is printed, then windows at 2x and 4x of it show
    what an overloaded controller still completes (the issue's "no congestion collapse": at least 90%
    of the sustainable rate)."""
    rows = []
    ladder = [float(x) for x in args.rates.split(",")]
    limit = 0.0
    queue = list(ladder)
    overload_done = False
    while queue:
        rate = queue.pop(0)
        window = argparse.Namespace(**{**vars(args), "rate": rate})
        r = trio.run(_workload, ctl, window, stats_file)
        f = r["fleet"]
        rows.append(
            {
                "nodes": args.nodes,
                "offered_per_s": rate,
                "completed_per_s": round(r["completed_per_s"], 1),
                "accepted_per_s": round(r["submitted"] / r["elapsed"], 1),
                "refused": r["refused"],
                "backlog_end": r["backlog_end"],
                "backlog_slope_per_s": round(r["backlog_slope"], 2),
                "heartbeat_recent_p99_ms": round(f.get("heartbeat_recent_p99_ms", 0), 1),
                "submit_p99_ms": round(r["submit_p99_ms"], 1),
                "false_down_end": r["down_end"],
                "controller_cpu_pct": round(r["cpu_share"] * 100),
                # the issue's figure: controller CPU per completed job (target <= 0.6 ms)
                "controller_cpu_ms_per_job": round(
                    1000 * r["cpu_share"] / max(r["completed_per_s"], 1e-9), 2
                ),
                # how often its threads blocked (and so woke): what batching saves
                "controller_wakes_per_job": round(r["sleeps_per_s"] / max(r["completed_per_s"], 1e-9), 2),
                "controller_rss_mib": round(r["rss_mb"]),
                "sustained": sustained(rate, r["completed_per_s"], r["backlog_slope"], r["refused"]),
            }
        )
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
        if args.find_limit and not overload_done:
            if rows[-1]["sustained"]:
                limit = rate
            else:
                queue = [2 * limit, 4 * limit] if limit else []
                overload_done = True
    where = "" if args.pin is None else f", the controller alone on core {args.pin}"
    print(f"\nsweep: {args.nodes} virtual nodes, {args.duration:g} s per rate, {os.cpu_count()} cores here{where}")
    print_table(list(rows[0]), [tuple(r.values()) for r in rows])
    if args.find_limit:
        base = next((r["completed_per_s"] for r in rows if r["offered_per_s"] == limit), 0.0)
        print(f"highest sustained offered rate: {limit:g} jobs/s (completed {base:g}/s)")
        for factor in (2, 4):
            over = [r for r in rows[-2:] if limit and r["offered_per_s"] == factor * limit]
            if over and base:
                share = over[0]["completed_per_s"] / base
                print(
                    f"offered {factor}x ({factor * limit:g}/s): completed {over[0]['completed_per_s']:g}/s = "
                    f"{share:.0%} of the sustained rate, {over[0]['refused']} submissions refused and retried, "
                    f"heartbeat p99 {over[0]['heartbeat_recent_p99_ms']:g} ms"
                )
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"(written to {args.csv})")
        from bench.series import write_series

        stem = (args.csv[: -len(".csv")] if args.csv.endswith(".csv") else args.csv) + "_curve"
        written = write_series(
            stem,
            "offered jobs/s",
            "jobs/s",
            ["offered", "completed", "controller CPU ms per completed job"],
            [(r["offered_per_s"], r["completed_per_s"], r["controller_cpu_ms_per_job"]) for r in rows],
            title=f"{args.nodes} simulated nodes: completed vs offered",
            right=["controller CPU ms per completed job"],
            right_label="controller CPU ms per completed job",
        )
        print(f"(plot: {written[-1]})")


def _pacing_settings(args: argparse.Namespace) -> str:
    """The ``[controller]`` lines for the run-loop pacing flags given ("" for the controller's defaults)."""
    lines = ""
    if args.pace_linger_ms is not None:
        lines += f"pace_linger_ms = {args.pace_linger_ms}\n"
    if args.pace_busy_fraction is not None:
        lines += f"pace_busy_fraction = {args.pace_busy_fraction}\n"
    return lines


def pin_apart(controller_pid: int, core: int) -> set[int]:
    """Give the controller (every thread it has; later ones inherit) ``core`` alone, and this process
    the other cores, which the simulator and the load generator it starts inherit. Returns those."""
    others = os.sched_getaffinity(0) - {core}
    if core not in os.sched_getaffinity(0) or not others:
        raise SystemExit(f"--pin {core}: needs that core and at least one other in this process's affinity")
    for tid in os.listdir(f"/proc/{controller_pid}/task"):
        os.sched_setaffinity(int(tid), {core})
    os.sched_setaffinity(0, others)
    return others


def fleet_phase(args: argparse.Namespace) -> None:
    pki = Path(tempfile.mkdtemp(prefix="spur-bench-pki-")) if args.tls else None
    tls_extra = _tls_setup(pki) if pki is not None else ""
    with controller(
        wal_fsync=not args.no_fsync,
        heartbeat_interval_secs=int(args.heartbeat),
        node_timeout_secs=90,
        extra=tls_extra,
        controller_extra=_pacing_settings(args),
    ) as ctl:
        if args.pin is not None:
            others = pin_apart(ctl.pid, args.pin)
            print(f"controller pinned to core {args.pin}; simulator and load generator on {sorted(others)}")
        stats_file = ctl.root / "fleet.json"
        log = open(ctl.root / "fleet.log", "wb")
        fleet = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "integration.fleet",
                "--controller",
                ctl.address,
                "--nodes",
                str(args.nodes),
                "--heartbeat",
                str(args.heartbeat),
                "--runtime-mean",
                str(args.runtime_mean),
                "--connections",
                str(args.connections),
                "--stats-file",
                str(stats_file),
                *(["--tls-dir", str(pki)] if pki is not None else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            began = time.monotonic()
            cpu_before = ctl.cpu_secs()
            wait_for(
                lambda: fleet.poll() is None and _fleet_stats(stats_file).get("registered") == args.nodes,
                timeout=600,
                interval=0.5,
                what=f"{args.nodes} virtual nodes to register",
            )
            register_secs = time.monotonic() - began
            args.fleet_pid = fleet.pid
            register_cpu = ctl.cpu_secs() - cpu_before
            rss_idle = ctl.rss_mb()
            workload = _array_workload if args.array else _workload
            if args.rates:
                sweep(ctl, args, stats_file)
                return
            if args.profile:
                with Profiler(ctl.pid, args.duration) as prof:
                    r = trio.run(workload, ctl, args, stats_file)
            else:
                r = trio.run(workload, ctl, args, stats_file)
        finally:
            fleet.kill()
            fleet.wait()
            log.close()
    if args.array:
        print(
            f"\narray: {args.array} tasks of `true` on {args.nodes} virtual nodes ({os.cpu_count()} cores here)"
        )
        rows = [
            ("tasks completed", f"{r['completed']} of {args.array}"),
            ("makespan (submit to last report)", f"{r['makespan']:.1f} s"),
            (
                "controller CPU meanwhile",
                f"{r['cpu']:.1f} s ({r['cpu'] / r['makespan'] * 100:.0f}% of one core)",
            ),
            (
                "squeue samples (lines max)",
                f"{len(r['views'])} ({max((v[1] for v in r['views']), default=0)})",
            ),
        ]
        rows += [
            (f"squeue at {t:.0f} s: {count} lines", line.strip()[:70]) for t, count, line in r["views"][:8]
        ]
        print_table(["figure", "value"], rows)
        if args.profile:
            prof.print_top(40)
            if args.profile_out:
                Path(args.profile_out).write_text(prof.text)
        return
    f = r["fleet"]
    print(
        f"\nfleet: {args.nodes} virtual nodes, heartbeat every {args.heartbeat:g}s, {args.rate:g} jobs/s for "
        f"{args.duration:g}s, run time exp(mean {args.runtime_mean:g}s), fsync={'off' if args.no_fsync else 'on'}"
        + (f", up to {args.per_call} submissions per SubmitJobs call" if args.per_call > 1 else "")
        + ("" if args.pace_linger_ms is None else f", pace_linger_ms={args.pace_linger_ms:g}")
        + ("" if args.pace_busy_fraction is None else f", pace_busy_fraction={args.pace_busy_fraction:g}")
    )
    rows = [
        ("registration of all nodes", f"{register_secs:.1f} s ({args.nodes / register_secs:.0f} nodes/s)"),
        ("controller CPU while registering", f"{register_cpu / register_secs * 100:.0f}% of one core"),
        ("controller RSS after registration", f"{rss_idle:.0f} MiB"),
        ("controller CPU under load", f"{r['cpu_share'] * 100:.1f}% of one core"),
        (
            "controller wakes (its threads blocking) per completed job",
            f"{r['sleeps_per_s'] / max(r['completed_per_s'], 1e-9):.2f} ({r['sleeps_per_s']:.0f}/s)",
        ),
        ("controller RSS at end", f"{r['rss_mb']:.0f} MiB"),
        (
            "fleet simulator / load generator CPU",
            f"{r['fleet_cpu_share'] * 100:.0f}% / {r['loadgen_cpu_share'] * 100:.0f}% of one core "
            f"({os.cpu_count()} cores here)",
        ),
        (
            "heartbeats in window",
            f"{r['heartbeats_in_window']} ({r['heartbeats_in_window'] / r['elapsed']:.0f}/s)",
        ),
        (
            "heartbeat RPC latency p50/p99/max",
            f"{f.get('heartbeat_p50_ms', 0):.1f} / {f.get('heartbeat_p99_ms', 0):.1f} / "
            f"{f.get('heartbeat_max_ms', 0):.1f} ms",
        ),
        ("heartbeat failures (fleet)", f"{f.get('heartbeat_failures', 0)}"),
        ("false DOWN nodes (max sampled / end)", f"{r['down_max']} / {r['down_end']} of {r['nodes']}"),
        ("submit latency p50/p99", f"{r['submit_p50_ms']:.1f} / {r['submit_p99_ms']:.1f} ms"),
        ("jobs submitted (errors)", f"{r['submitted']} ({r['submit_errors']})"),
        ("submissions still in flight at the window's end", str(r.get("unanswered", 0))),
        ("submissions refused (RESOURCE_EXHAUSTED, retried)", f"{r['refused']}"),
        ("jobs completed/s", f"{r['completed_per_s']:.1f}"),
        ("scheduler backlog (PENDING) max / end", f"{r['backlog_max']} / {r['backlog_end']}"),
        ("backlog trend over the last 2/3 (jobs/s; ~0 = flat)", f"{r['backlog_slope']:+.2f}"),
        ("job states at end", " ".join(f"{k}={v}" for k, v in sorted(r["by_state"].items()))),
    ]
    print_table(["figure", "value"], rows)
    if args.profile:
        print("\nprofile of spurctld under load (py-spy):")
        prof.print_top(40)
        if args.profile_out:
            Path(args.profile_out).write_text(prof.text)
            print(f"(raw py-spy samples written to {args.profile_out})")


async def _rss_load(ctl: BenchController, jobs: int, clients: int) -> list[tuple[str, float]]:
    client = _Client(ctl.address, channels=4)
    out = [("empty", ctl.rss_mb())]
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        ids: list[int] = []

        async def worker(n: int) -> None:
            for _ in range(n):
                ids.append((await client.call("SubmitJob", pb.SubmitJobRequest(spec=SPEC))).job_id)

        began = time.monotonic()
        async with trio.open_nursery() as inner:
            for i in range(clients):
                inner.start_soon(worker, jobs // clients + (i < jobs % clients))
        submit_rate = jobs / (time.monotonic() - began)
        out.append((f"{jobs} pending (submitted at {submit_rate:.0f}/s)", ctl.rss_mb()))
        half = sorted(ids)[: jobs // 2]

        async def canceller(chunk: list[int]) -> None:
            for job_id in chunk:
                await client.call("CancelJob", pb.CancelJobRequest(job_id=job_id))

        async with trio.open_nursery() as inner:
            for i in range(clients):
                inner.start_soon(canceller, half[i::clients])
        out.append((f"{jobs - len(half)} pending + {len(half)} cancelled (history)", ctl.rss_mb()))
        nursery.cancel_scope.cancel()
    return out


def rss_phase(args: argparse.Namespace) -> None:
    # A long scheduler interval: this phase measures memory, not planning (kicks still run passes).
    with controller(wal_fsync=False, scheduler_interval_secs=60) as ctl:
        rows = trio.run(_rss_load, ctl, args.rss_jobs, 32)
    base = rows[0][1]
    print_table(
        ["controller holding", "RSS MiB", "KiB/job over empty"],
        [
            (what, rss, (rss - base) * 1024 / args.rss_jobs if i else 0.0)
            for i, (what, rss) in enumerate(rows)
        ],
        title=f"controller RSS with {args.rss_jobs} jobs (wal_fsync off, no nodes)",
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--heartbeat", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=100.0, help="jobs submitted per second")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of steady load (issue: 300)")
    ap.add_argument("--runtime-mean", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=8, help="fleet's HTTP/2 connections to the controller")
    ap.add_argument("--rss-jobs", type=int, default=10000, help="jobs for the RSS phase (0 skips it)")
    ap.add_argument("--no-fsync", action="store_true", help="controller.wal_fsync = false in the fleet phase")
    ap.add_argument(
        "--pace-linger-ms",
        type=float,
        default=None,
        help="controller.pace_linger_ms in the fleet phase (0: no run-loop pacing; default: the controller's)",
    )
    ap.add_argument(
        "--pace-busy-fraction",
        type=float,
        default=None,
        help="controller.pace_busy_fraction in the fleet phase (default: the controller's)",
    )
    ap.add_argument("--skip-fleet", action="store_true")
    ap.add_argument("--profile", action="store_true", help="py-spy profile of the controller under load")
    ap.add_argument("--rates", default="", help="comma-separated offered rates: one window each (a sweep)")
    ap.add_argument("--csv", default="", help="with --rates: write the sweep's rows to this CSV file")
    ap.add_argument(
        "--sample-secs",
        type=float,
        default=15.0,
        help="seconds between backlog/DOWN samples (GetJobs+GetNodes)",
    )
    ap.add_argument(
        "--find-limit",
        action="store_true",
        help="with --rates (ascending): stop at the first rate not sustained, then offer 2x and 4x the last sustained",
    )
    ap.add_argument(
        "--tls",
        action="store_true",
        help="[tls] mode = required on spurctld, the fleet (both ways) and this client (a fresh CA per run)",
    )
    ap.add_argument(
        "--loadgen",
        choices=("pipelined", "trio"),
        default="pipelined",
        help="pipelined: bench.submitter in its own process (default); trio: the benchmark's own stub",
    )
    ap.add_argument(
        "--per-call",
        type=int,
        default=1,
        help="pipelined: submissions per SubmitJobs call, as a bulk client sends them (1: one SubmitJob each)",
    )
    ap.add_argument(
        "--pin",
        type=int,
        default=None,
        metavar="CORE",
        help="the controller alone on this core, the simulator and load generator on the others "
        "(a controller on its own core, as on a dedicated host; default: all share every core)",
    )
    ap.add_argument("--array", type=int, default=0, help="instead of the steady load: one --array 1-N job")
    ap.add_argument("--profile-out", default="", help="also write py-spy's raw samples to this file")
    args = ap.parse_args(argv)
    if not args.skip_fleet:
        fleet_phase(args)
    if args.rss_jobs:
        rss_phase(args)


if __name__ == "__main__":
    main()
