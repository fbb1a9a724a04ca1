"""Submit-to-running latency on an idle cluster, and drain time of many tiny jobs on one real agent.

    python -m bench.latency [--samples 30] [--drain 200] [--cpus 2] [--repeat 3] [--scheduler-interval 2]

Starts a real spurctld (default config: scheduler.interval_secs 2, WAL fsync on) and one real spurd
with ``--cpus`` CPUs (process backend).

- latency: ``--samples`` jobs one after another on the idle cluster; for each, the time from sending
  the SubmitJob RPC to the first RUNNING seen on a ``WatchJob`` stream opened right after the submit
  returned (and to COMPLETED). Prints p50/p99/max.
- drain: ``--drain`` ``--wrap true`` jobs (1 CPU each) submitted at once; time from the first submit
  until every one is terminal (polling GetJobs for the unfinished ones every 100 ms), median over ``--repeat`` drains.
  Slurm 22.05 drains 200 such jobs on 2 CPUs in 5.6 s (figure from the issue).

Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

from bench.common import BenchController, controller, median, percentile, print_table
from integration.harness import BIN, Proc, free_port, wait_for

WRAP = "#!/bin/sh\n# wrap\ntrue\n"


def start_agent(ctl: BenchController, cpus: int) -> Proc:
    port = free_port()
    argv = [
        str(BIN / "spurd"),
        "-D",
        "--controller",
        ctl.address,
        "--listen",
        f"127.0.0.1:{port}",
        "--name",
        "bench1",
        "--address",
        "127.0.0.1",
        "--state-dir",
        str(ctl.root / "agent"),
        "--cpus",
        str(cpus),
        "--memory-mb",
        "4000",
        "--kill-grace",
        "2",
        "--backend",
        "process",
    ]
    env = dict(os.environ)
    env.pop("SPUR_CONF", None)
    return Proc(argv, ctl.root / "spurd.log", env).start()


async def _latency(address: str, samples: int, work_dir: str) -> tuple[list[float], list[float]]:
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    to_running: list[float] = []
    to_done: list[float] = []
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        stub = controller_stub(ch)
        await _wait_idle_node(stub)
        spec = pb.JobSpec(name="wrap", script=WRAP, work_dir=work_dir)
        for _ in range(samples):
            began = trio.current_time()
            job_id = (await stub.SubmitJob(pb.SubmitJobRequest(spec=spec), timeout=30)).job_id
            running_at = None
            async for info in stub.WatchJob(pb.GetJobsRequest(job_ids=[job_id]), timeout=60):
                if info.state != "PENDING" and running_at is None:
                    running_at = trio.current_time()
                if info.state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
                    break
            done_at = trio.current_time()
            to_running.append((running_at or done_at) - began)
            to_done.append(done_at - began)
            await trio.sleep(0.2)  # let the node go idle again (idle cluster per sample)
    return to_running, to_done


async def _wait_idle_node(stub) -> None:
    from spur.rpc.proto import spur_pb2 as pb

    with trio.fail_after(30):
        while True:
            nodes = (await stub.GetNodes(pb.GetNodesRequest(), timeout=10)).nodes
            if nodes and all(n.state.lower().startswith("idle") for n in nodes):
                return
            await trio.sleep(0.1)


async def _drain(address: str, jobs: int, work_dir: str) -> float:
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        stub = controller_stub(ch)
        await _wait_idle_node(stub)
        spec = pb.JobSpec(name="wrap", script=WRAP, work_dir=work_dir)
        ids: list[int] = []
        began = trio.current_time()

        async def submit(n: int) -> None:
            for _ in range(n):
                ids.append((await stub.SubmitJob(pb.SubmitJobRequest(spec=spec), timeout=60)).job_id)

        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(submit, jobs // 8 + (i < jobs % 8))
        terminal = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}
        remaining = set(ids)
        # Ask only about jobs not yet seen terminal: polling all 200 every few ms would itself cost the
        # controller a quarter of its CPU (job_to_proto), slowing what is measured.
        with trio.fail_after(600):
            while remaining:
                req = pb.GetJobsRequest(job_ids=sorted(remaining), include_finished=True)
                resp = await stub.GetJobs(req, timeout=30)
                remaining -= {j.job_id for j in resp.jobs if j.state in terminal}
                if remaining:
                    await trio.sleep(0.1)
        return trio.current_time() - began


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--drain", type=int, default=200)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scheduler-interval", type=float, default=2.0)
    ap.add_argument("--no-fsync", action="store_true")
    args = ap.parse_args(argv)
    with controller(wal_fsync=not args.no_fsync, scheduler_interval_secs=args.scheduler_interval) as ctl:
        agent = start_agent(ctl, args.cpus)
        try:
            wait_for(agent.alive, timeout=5, what="spurd")
            work = ctl.root / "work"
            work.mkdir()
            running, done = trio.run(_latency, ctl.address, args.samples, str(work))
            drains = []
            for _ in range(args.repeat):
                drains.append(trio.run(_drain, ctl.address, args.drain, str(work)))
        finally:
            agent.kill()
    ms = 1000.0
    print_table(
        ["from submit RPC to", "p50 ms", "p99 ms", "max ms", "samples"],
        [
            (
                "RUNNING (WatchJob)",
                ms * percentile(running, 0.5),
                ms * percentile(running, 0.99),
                ms * max(running),
                len(running),
            ),
            ("COMPLETED", ms * percentile(done, 0.5), ms * percentile(done, 0.99), ms * max(done), len(done)),
        ],
        title=f"idle cluster, 1 agent with {args.cpus} CPUs, scheduler.interval_secs {args.scheduler_interval:g}, "
        f"fsync={'off' if args.no_fsync else 'on'}",
    )
    print_table(
        ["jobs", "agent CPUs", "drain s (median)", "jobs/s", "runs", "Slurm 22.05"],
        [
            (
                args.drain,
                args.cpus,
                median(drains),
                args.drain / median(drains),
                " ".join(f"{d:.1f}" for d in drains),
                "5.6 s (200 jobs, 2 CPUs)",
            ),
        ],
        title="drain of --wrap true jobs",
    )


if __name__ == "__main__":
    sys.exit(main())
