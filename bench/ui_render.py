"""Dashboard server render time with 10,000 queued jobs (target: < 300 ms for the Jobs page).

Starts a real spurctld with no agents (so nothing runs: every job stays PENDING), submits
``--jobs`` jobs over gRPC (arrays of 1,000 tasks, plus ``--singles`` plain jobs in 4 partitions'
worth of users so the Jobs page has full pages of unfolded rows), signs in to the dashboard and
times each page (median and max of ``--repeat`` requests, client-measured on loopback, so an upper
bound of the server time). ``--baseline DIR`` (a checkout of another commit) runs the same
measurement against that checkout's spurctld, in the same run, pages taking turns, and prints both.
``--profile`` samples this tree's spurctld with py-spy while it serves ``/ui/jobs``.
Run: ``.venv/bin/python -m bench.ui_render [--jobs 10000] [--repeat 10] [--baseline DIR] [--profile]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import Profiler
from integration.harness import Cluster
from spur.rpc.proto import spur_pb2 as pb

PAGES = ("/ui/jobs", "/ui/jobs?sort=id&order=desc", "/ui/jobs?state=PD&sort=user&page=3", "/ui/")


class _Cluster(Cluster):
    """A :class:`Cluster` whose spurctld imports Spur from ``source`` (another checkout) when given."""

    source: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        env = super().env
        if self.source is not None:
            env["PYTHONPATH"] = str(self.source.resolve())
        return env


def _start(jobs: int, singles: int, source: Path | None) -> _Cluster:
    root = Path(tempfile.mkdtemp(prefix="spur-ui-bench-"))
    c = _Cluster(root, controller_extra="max_job_count = 200000\n")
    c.source = source
    c.start_controller()
    c.wait_rest()
    spec = pb.JobSpec(script="#!/bin/sh\ntrue\n", work_dir=str(root), name="bench")
    arrays = jobs - singles
    for start in range(0, arrays, 1000):
        n = min(1000, arrays - start)
        spec.array = f"0-{n - 1}"
        c.call("SubmitJob", pb.SubmitJobRequest(spec=spec))
    spec.array = ""
    for i in range(singles):
        spec.name = f"single-{i % 37}"
        c.call("SubmitJob", pb.SubmitJobRequest(spec=spec))
    return c


def _time(h: httpx.Client, path: str) -> float:
    t0 = time.perf_counter()
    r = h.get(path)
    ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, r.text[:300]
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=2_000, help="of --jobs, plain (non-array) jobs")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--baseline", type=Path, help="another checkout, measured in the same run")
    ap.add_argument("--profile", action="store_true", help="py-spy profile of this tree's spurctld")
    args = ap.parse_args()
    trees: dict[str, Path | None] = {"this tree": None}
    if args.baseline:
        trees["baseline"] = args.baseline
    clusters = {name: _start(args.jobs, args.singles, src) for name, src in trees.items()}
    try:
        clients = {}
        for name, c in clusters.items():
            h = httpx.Client(base_url=f"http://127.0.0.1:{c.rest_port}", timeout=60)
            assert h.post("/ui/login", data={"user": "root"}).status_code == 303
            _time(h, "/ui/jobs")  # warm caches
            clients[name] = h
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for path in PAGES:
                for name, h in clients.items():
                    times.setdefault((name, path), []).append(_time(h, path))
        print(f"{args.jobs} jobs queued ({args.singles} plain, the rest in arrays of 1,000); {os.cpu_count()} CPUs")
        for path in PAGES:
            for name in clients:
                t = times[(name, path)]
                print(f"{path:38s} {name:9s} median {statistics.median(t):6.1f} ms, max {max(t):6.1f} ms")
        if args.profile:
            c = clusters["this tree"]
            assert c.controller is not None
            h = clients["this tree"]
            with Profiler(c.controller.popen.pid if c.controller.popen else 0, 8) as prof:
                end = time.monotonic() + 7
                while time.monotonic() < end:
                    _time(h, "/ui/jobs")
                    _time(h, "/ui/")
            print("\nprofile of spurctld (py-spy) serving /ui/jobs and /ui/")
            prof.print_top(30)
        for h in clients.values():
            h.close()
    finally:
        for c in clusters.values():
            c.stop()


if __name__ == "__main__":
    main()
