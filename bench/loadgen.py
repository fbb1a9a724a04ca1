"""What offering load costs the load generator: the pipelined submitter beside the trio stub, one run.

    python -m bench.loadgen [--rates 500,1000,2000] [--duration 10]

For each rate, each generator runs in its own process against its own fresh spurctld (no nodes, so
every job stays pending; WAL fsync off) and submits for ``--duration`` s. Prints per generator and
rate: the calls answered, refused (RESOURCE_EXHAUSTED, retried), the generator's CPU as a share of one
core over the offered window (the drain of refused calls included) and per call, and submit
p50/p99. The issue's target: 2,000 jobs/s offered for under 30% of a core. Figures only; nothing
here asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import trio

from bench.common import controller, percentile, print_table
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

SPEC = pb.JobSpec(name="fleet", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)


async def _trio_generator(address: str, rate: float, duration: float) -> dict[str, object]:
    """bench.fleet's former generator: a task per submission over four held trio/h2 channels."""
    from bench.fleet import _Client

    client = _Client(address)
    lat: list[float] = []
    refused = errors = 0
    cpu0 = time.process_time()
    began = time.monotonic()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)

        async def submit(due: float) -> None:
            nonlocal refused, errors
            for attempt in range(1, 16):
                try:
                    await client.call("SubmitJob", pb.SubmitJobRequest(spec=SPEC))
                    lat.append(trio.current_time() - due)
                    return
                except RpcError as exc:
                    if exc.code is not StatusCode.RESOURCE_EXHAUSTED:
                        errors += 1
                        return
                    refused += 1
                    await trio.sleep(attempt * (0.5 + random.random()))
            errors += 1

        t0 = trio.current_time()
        async with trio.open_nursery() as calls:
            for i in range(int(rate * duration)):
                await trio.sleep_until(t0 + i / rate)
                calls.start_soon(submit, t0 + i / rate)
        nursery.cancel_scope.cancel()
    cpu = time.process_time() - cpu0
    return {
        "submitted": len(lat),
        "refused": refused,
        "errors": errors,
        "submit_p50_ms": 1000 * percentile(lat, 0.5),
        "submit_p99_ms": 1000 * percentile(lat, 0.99),
        "elapsed_s": time.monotonic() - began,
        "cpu_s": cpu,
        "cpu_share": cpu / duration,  # its CPU for the offered window, drain included
        "cpu_us_per_call": 1e6 * cpu / max(1, len(lat) + refused),
    }


def _run(generator: str, rate: float, duration: float) -> dict[str, object]:
    with controller(wal_fsync=False) as ctl:
        if generator == "pipelined":
            argv = [sys.executable, "-m", "bench.submitter", "--address", ctl.address]
            argv += ["--rate", str(rate), "--duration", str(duration)]
        else:
            argv = [sys.executable, "-m", "bench.loadgen", "--inner-trio", ctl.address, str(rate), str(duration)]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.loadgen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="500,1000,2000")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--inner-trio", nargs=3, metavar=("ADDRESS", "RATE", "DURATION"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner_trio:
        address, rate, duration = args.inner_trio
        print(json.dumps(trio.run(_trio_generator, address, float(rate), float(duration))))
        return 0
    rows = []
    for rate in [float(r) for r in args.rates.split(",")]:
        for generator in ("pipelined", "trio"):
            r = _run(generator, rate, args.duration)
            rows.append(
                (
                    generator,
                    f"{rate:g}",
                    r["submitted"],
                    r["refused"],
                    f"{100 * float(r['cpu_share']):.0f}%",
                    f"{float(r['cpu_us_per_call']):.0f}",
                    f"{float(r['submit_p50_ms']):.0f}",
                    f"{float(r['submit_p99_ms']):.0f}",
                )
            )
            print(f"{generator} at {rate:g}/s: {json.dumps(r)}", flush=True)
    headers = ["generator", "offered/s", "answered", "refused", "CPU (1 core)", "us/call", "p50 ms", "p99 ms"]
    print_table(headers, rows, title=f"load generator cost, {args.duration:g} s per rate, one controller each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
