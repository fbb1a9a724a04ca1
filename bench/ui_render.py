"""Dashboard server render time with 10,000 queued jobs (target: < 300 ms for the Jobs page).

Starts a real spurctld with no agents (so nothing runs: every job stays PENDING), submits
``--jobs`` jobs over gRPC, signs in to the dashboard and times ``GET /ui/jobs`` and ``GET /ui/``
(median and max of ``--repeat`` requests, client-measured on loopback, so an upper bound of the
server time). Run: ``.venv/bin/python -m bench.ui_render [--jobs 10000] [--repeat 10]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from integration.harness import Cluster
from spur.rpc.proto import spur_pb2 as pb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="spur-ui-bench-"))
    c = Cluster(root, controller_extra="max_job_count = 200000\n")
    c.start_controller()
    try:
        c.wait_rest()
        spec = pb.JobSpec(script="#!/bin/sh\ntrue\n", work_dir=str(root), name="bench")
        for start in range(0, args.jobs, 1000):
            n = min(1000, args.jobs - start)
            spec.array = f"0-{n - 1}"
            c.call("SubmitJob", pb.SubmitJobRequest(spec=spec))
        with httpx.Client(base_url=f"http://127.0.0.1:{c.rest_port}", timeout=60) as h:
            assert h.post("/ui/login", data={"user": "root"}).status_code == 303
            for path in ("/ui/jobs", "/ui/jobs?sort=id&order=desc", "/ui/"):
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    r = h.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200, r.text[:300]
                print(f"{path:32s} {args.jobs} jobs: median {statistics.median(times):6.1f} ms, max {max(times):6.1f} ms")
    finally:
        c.stop()


if __name__ == "__main__":
    main()
