"""The REST API's costs on a real spurctld.

    python -m bench.rest_bench [--jobs 10000] [--submits 1600] [--clients 16] [--rounds 4] [--repeat 3] [--settle 3]
                               [--versions v0.0.38,v0.0.42] [--prerender v0.0.42] [--refill]
                               [--list-only | --submit-only]

Prints:

- ``GET /slurm/<version>/jobs`` time for each of ``--versions`` (default v0.0.38 and v0.0.42) with ``--jobs`` pending jobs in the queue (submitted as job arrays
  over gRPC; no agents, so all stay pending): the first request's time (every job mapped and shaped),
  median/p90 of the later requests (unchanged jobs come from the rendered-jobs cache,
  :mod:`spur.rest.jobcache`), response size; spurctld's RSS (VmRSS) before the first request and
  after each version's first; ``--prerender`` sets ``[rest] prerender_versions``, ``--refill`` lists
  once more after ``--jobs`` more jobs arrived;
- REST submit throughput (``POST /slurm/<version>/job/submit`` for v0.0.38 and each of
  ``--versions``) with ``--clients`` concurrent clients (each with its own keep-alive connection),
  and gRPC SubmitJob throughput with the same number of clients against the same controller in the
  same run, in ``--rounds`` rounds in which the APIs take turns; the ratios to v0.0.38's;
- start-up: time from exec to "gRPC and REST accept connections" with ``[rest] enabled`` vs time to
  "gRPC accepts" with REST disabled (median of ``--repeat`` starts), i.e. what the REST stack adds;
- the CLI import check: ``python -X importtime -c 'import spur.cli.squeue'`` total, and whether any
  of quart, hypercorn or prometheus_client was imported (it must not be).

Figures only; nothing here asserts. Targets (issue 11): jobs list < 300 ms at 10,000 jobs, REST
submit >= 300 jobs/s with 16 clients, REST start-up < 0.5 s.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

from bench.common import controller, median, percentile, print_table
from bench.submit_throughput import submit_all
from integration.harness import BIN, Proc, free_port, wait_for
from spur.auth.identity import identity_metadata
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.stub import controller_stub

USER = getpass.getuser()
HEADERS = {"X-SLURM-USER-NAME": USER}
BODY = {"script": "#!/bin/sh\ntrue\n", "job": {"name": "bench", "environment": {}, "current_working_directory": "/tmp"}}


async def fill_queue(address: str, jobs: int) -> None:
    """``jobs`` pending jobs, as arrays of up to 1000 tasks, from 8 concurrent callers."""
    md = identity_metadata()
    sizes = [min(1000, jobs - i) for i in range(0, jobs, 1000)]

    async with open_channel(address, metadata_provider=lambda: md) as ch:
        stub = controller_stub(ch)
        limiter = trio.Semaphore(8)

        async def one(n: int) -> None:
            async with limiter:
                spec = pb.JobSpec(name="fill", script="#!/bin/sh\ntrue\n", work_dir="/tmp", array=f"0-{n - 1}")
                await stub.SubmitJob(pb.SubmitJobRequest(spec=spec), timeout=300)

        async with trio.open_nursery() as nursery:
            for n in sizes:
                nursery.start_soon(one, n)


def time_jobs_list(rest: str, repeat: int, version: str = "v0.0.38") -> tuple[list[float], int, int]:
    times = []
    size = count = 0
    with httpx.Client(base_url=rest, headers=HEADERS, timeout=120) as client:
        client.get("/slurm/v0.0.38/ping")
        for _ in range(repeat):
            start = time.perf_counter()
            r = client.get(f"/slurm/{version}/jobs")
            times.append(time.perf_counter() - start)
            size, count = len(r.content), len(r.json()["jobs"])
    return times, size, count


BODY_V4 = {"job": {"script": "#!/bin/sh\ntrue\n", "name": "bench", "environment": [],
                   "current_working_directory": "/tmp"}}  # fmt: skip


async def rest_submits(rest: str, total: int, clients: int, version: str = "v0.0.38") -> float:
    body = BODY if version == "v0.0.38" else BODY_V4
    per = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]

    async def client_task(n: int, ready: trio.Event, go: trio.Event, done: list[int]) -> None:
        async with httpx.AsyncClient(base_url=rest, headers=HEADERS, timeout=120) as client:
            await client.get("/slurm/v0.0.38/ping")
            ready.set()
            await go.wait()
            for _ in range(n):
                r = await client.post(f"/slurm/{version}/job/submit", json=body)
                r.raise_for_status()
            done.append(n)

    go = trio.Event()
    done: list[int] = []
    readies = [trio.Event() for _ in per]
    async with trio.open_nursery() as nursery:
        for n, ready in zip(per, readies, strict=True):
            nursery.start_soon(client_task, n, ready, go, done)
        for ready in readies:
            await ready.wait()
        start = time.perf_counter()
        go.set()
    return sum(done) / (time.perf_counter() - start)


def submit_rounds(address: str, rest: str, versions: list[str], total: int, clients: int, rounds: int) -> dict[str, float]:
    """Jobs/s per REST version (and ``"grpc"``): ``total`` submits each, in ``rounds`` rounds in
    which every API takes a turn (the order rotating), so none is measured only against a longer
    queue or a busier moment than the others."""
    apis = [*versions, "grpc"]
    spent = dict.fromkeys(apis, 0.0)
    done = dict.fromkeys(apis, 0)
    for r in range(rounds):
        n = total // rounds + (1 if r < total % rounds else 0)
        for api in apis[r % len(apis):] + apis[: r % len(apis)]:
            if api == "grpc":
                rate = trio.run(submit_all, address, n, clients, "separate")
            else:
                rate = trio.run(rest_submits, rest, n, clients, api)
            spent[api] += n / rate
            done[api] += n
    return {api: done[api] / spent[api] for api in apis}


def startup_secs(rest_enabled: bool) -> float:
    """Seconds from exec until gRPC (and REST, when enabled) accept connections."""
    with tempfile.TemporaryDirectory(prefix="spur-bench-") as tmp:
        base = Path(tmp)
        port, rest_port = free_port(), free_port()
        conf = base / "spur.conf"
        conf.write_text(
            "[controller]\n"
            f'state_dir = "{base / "state"}"\n'
            f'rest_addr = "127.0.0.1:{rest_port}"\n'
            'metrics_addr = "127.0.0.1:0"\n'
            "wal_fsync = false\n"
            f"[rest]\nenabled = {'true' if rest_enabled else 'false'}\n"
        )
        env = dict(os.environ)
        env.pop("SPUR_CONF", None)
        argv = [str(BIN / "spurctld"), "-f", str(conf), "--listen", f"127.0.0.1:{port}"]
        start = time.perf_counter()
        proc = Proc(argv, base / "spurctld.log", env).start()
        try:
            ports = [port, rest_port] if rest_enabled else [port]

            def up() -> bool:
                for p in ports:
                    with socket.create_connection(("127.0.0.1", p), timeout=0.2):
                        pass
                return True

            wait_for(up, timeout=30, interval=0.005, what="spurctld")
            return time.perf_counter() - start
        finally:
            proc.kill()


def cli_import_check() -> tuple[float, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import spur.cli.squeue"], capture_output=True, text=True
    )
    total_us = 0
    heavy = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = [p.strip() for p in line[len("import time:") :].split("|")]
        if not parts[0].isdigit():
            continue
        name = parts[2]
        total_us += int(parts[0])  # self times add up to the whole import
        if name.split(".")[0] in ("quart", "quart_trio", "hypercorn", "prometheus_client"):
            heavy.append(name)
    return total_us / 1000, heavy


def jobs_lists(args: argparse.Namespace) -> None:
    """``GET /slurm/<version>/jobs`` for each of ``--versions``, same controller and queue, the
    versions taking turns request by request; spurctld's RSS before the first request, after each
    version's first and after all; with ``--refill``, once more per version after as many jobs again
    were submitted (what the idle-time rendering, :mod:`spur.rest.prerender`, keeps warm)."""
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    extra = ""
    if args.prerender is not None:
        named = ", ".join(f'"{v.strip()}"' for v in args.prerender.split(",") if v.strip())
        extra = f"[rest]\nprerender_versions = [{named}]\n"
    with controller(wal_fsync=False, scheduler_interval_secs=3600, extra=extra) as ctl:
        rest = f"http://{ctl.rest_address}"
        wait_for(lambda: httpx.get(f"{rest}/slurm/v0.0.38/ping", headers=HEADERS).status_code == 200, timeout=30)
        trio.run(fill_queue, ctl.address, args.jobs)
        time.sleep(args.settle)  # the controller's own work after the fill (WAL, snapshot) is not timed
        rss = [("before the first GET", ctl.rss_mb())]
        results: dict[str, tuple[list[float], int, int]] = {v: ([], 0, 0) for v in versions}
        for round_ in range(max(args.repeat, 3)):
            for version in versions:
                times, size, count = time_jobs_list(rest, 1, version)
                results[version] = (results[version][0] + times, size, count)
                if round_ == 0:
                    rss.append((f"after {version}'s first GET", ctl.rss_mb()))
        rss.append(("after all GETs", ctl.rss_mb()))
        rows = []
        for version, (times, size, count) in results.items():
            rows.append([version, args.jobs, count, f"{times[0] * 1000:.0f} ms", f"{median(times[1:]) * 1000:.0f} ms",
                         f"{percentile(times[1:], 0.9) * 1000:.0f} ms", f"{size / 1e6:.1f} MB"])  # fmt: skip
        print_table(["version", "jobs in queue", "jobs returned", "first", "median", "p90", "body"], rows,
                    title="GET /slurm/<version>/jobs (first: every job rendered; median, p90: the later requests)")  # fmt: skip
        if args.refill:
            trio.run(fill_queue, ctl.address, args.jobs)
            time.sleep(args.settle)
            rss.append(("after the refill", ctl.rss_mb()))
            rows = []
            for version in versions:
                times, size, count = time_jobs_list(rest, 1, version)
                rows.append([version, count, f"{times[0] * 1000:.0f} ms"])
            rss.append(("after the refill's GETs", ctl.rss_mb()))
            print_table(["version", "jobs returned", "first GET after the refill"], rows,
                        title=f"GET /slurm/<version>/jobs after {args.jobs} more jobs (and --settle)")  # fmt: skip
        print_table(["spurctld", "VmRSS"], [[when, f"{mb:.0f} MiB"] for when, mb in rss],
                    title="Controller memory (prerender_versions: "
                          + ("default" if args.prerender is None else repr(args.prerender)) + ")")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--submits", type=int, default=1600)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fsync", choices=["on", "off"], default="on")
    p.add_argument("--rounds", type=int, default=4, help="submit rounds; the APIs take turns in each")
    p.add_argument("--settle", type=float, default=3.0, help="seconds between filling the queue and the first GET")
    p.add_argument("--versions", default="v0.0.38,v0.0.42",
                   help="REST versions whose GET jobs list is timed (comma-separated)")  # fmt: skip
    p.add_argument("--prerender", default=None,
                   help="[rest] prerender_versions for the jobs-list run (comma-separated; '' for []; "
                        "default: the setting's default)")  # fmt: skip
    p.add_argument("--refill", action="store_true", help="after the jobs lists, submit --jobs more and list again")
    p.add_argument("--list-only", action="store_true", help="only the jobs-list timings")
    p.add_argument("--submit-only", action="store_true", help="only the submit throughputs")
    args = p.parse_args(argv)
    if args.list_only:
        jobs_lists(args)
        return 0

    with controller(wal_fsync=args.fsync == "on", scheduler_interval_secs=3600) as ctl:
        rest = f"http://{ctl.rest_address}"
        wait_for(lambda: httpx.get(f"{rest}/slurm/v0.0.38/ping", headers=HEADERS).status_code == 200, timeout=30)
        rest_versions = ["v0.0.38", *[v.strip() for v in args.versions.split(",") if v.strip() and v.strip() != "v0.0.38"]]
        rates = submit_rounds(ctl.address, rest, rest_versions, args.submits, args.clients, args.rounds)
        rest_rate, grpc_rate = rates["v0.0.38"], rates["grpc"]
        rows = [
            ["REST POST v0.0.38 job/submit", args.clients, args.submits, f"{rest_rate:.0f}"],
            ["gRPC SubmitJob", args.clients, args.submits, f"{grpc_rate:.0f}"],
            ["REST / gRPC", "", "", f"{rest_rate / grpc_rate:.2f}"],
        ]
        for version in rest_versions[1:]:
            rows.append([f"REST POST {version} job/submit", args.clients, args.submits, f"{rates[version]:.0f}"])
            rows.append([f"{version} / v0.0.38", "", "", f"{rates[version] / rest_rate:.2f}"])
        print_table(
            ["API", "clients", "jobs", "jobs/s"],
            rows,
            title=f"Submit throughput (WAL fsync {args.fsync}; same controller, same run, "
            f"{args.rounds} rounds taking turns)",
        )
    if args.submit_only:
        return 0
    jobs_lists(args)
    with_rest = [startup_secs(True) for _ in range(args.repeat)]
    without = [startup_secs(False) for _ in range(args.repeat)]
    print_table(
        ["spurctld start", "median"],
        [
            ["gRPC only ([rest] enabled = false)", f"{median(without):.2f} s"],
            ["gRPC + REST", f"{median(with_rest):.2f} s"],
            ["added by REST", f"{median(with_rest) - median(without):.2f} s"],
        ],
        title="Start-up (exec to accepting connections)",
    )
    ms, heavy = cli_import_check()
    print_table(
        ["command", "import time", "quart/hypercorn/prometheus_client imported"],
        [["import spur.cli.squeue", f"{ms:.0f} ms", ", ".join(heavy) or "none"]],
        title="CLI import check (-X importtime)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
