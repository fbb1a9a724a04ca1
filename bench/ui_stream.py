"""Does a watched dashboard slow submission down? Submit p99 at 500 jobs/s with and without live pages.

    python -m bench.ui_stream [--rate 500] [--duration 20] [--viewers 4] [--rounds 2] [--csv FILE]
                              [--pages /ui/,/ui/jobs,...] [--profile] [--baseline DIR]

Each run starts a fresh spurctld (no agents: every job stays queued, so every submission changes what
the pages show), then drives ``bench.submitter`` at ``--rate`` SubmitJob/s for ``--duration`` s and
records its latency percentiles and spurctld's CPU seconds. In the "watched" runs ``--viewers``
signed-in dashboard sessions hold the live stream (``/ui/events``) of the Overview, Jobs, Nodes and
Cluster pages open the whole time and count the ``live`` updates they receive. Plain and watched runs
alternate (``--rounds`` of each) so that drift of the machine falls on both alike. The target
(issue 27): the watched p99 within 10% of the plain one. Prints one row per run, the medians, their
ratio, and writes the rows as CSV. ``--baseline DIR`` (a checkout of another commit) runs its
spurctld in the same rounds, plain and watched, and prints its ratio beside this tree's.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import Profiler, controller, print_table
from integration.harness import wait_for

PAGES = ("/ui/", "/ui/jobs", "/ui/nodes", "/ui/cluster")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Run:
    tree: str  # "this tree" | "baseline"
    kind: str  # "plain" | "watched"
    p50_ms: float
    p99_ms: float
    submitted: int
    controller_cpu_s: float
    live_events: int


class Viewer(threading.Thread):
    """One signed-in browser's live stream of one page, counting its ``live`` events until stopped."""

    def __init__(self, base: str, page: str) -> None:
        super().__init__(daemon=True)
        self.base, self.page = base, page
        self.events = 0
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error = ""

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base, timeout=None) as h:
                # The bench's spurctld has no JWT key: the sign-in form takes a user name.
                if h.post("/ui/login", data={"user": "root"}).status_code != 303:
                    raise RuntimeError("sign-in refused")
                with h.stream("GET", "/ui/events", params={"page": self.page}) as stream:
                    self.ready.set()
                    for line in stream.iter_lines():
                        if line.startswith("event: live"):
                            self.events += 1
                        if self.stop.is_set():
                            return
        except Exception as exc:  # reported by the run, which then fails
            self.error = f"{self.page}: {exc!r}"
            self.ready.set()


def one_run(
    kind: str,
    rate: int,
    duration: float,
    viewers: int,
    pages: list[str],
    profile: bool = False,
    source: Path | None = None,
) -> Run:
    with controller(source=source) as ctl:  # 100,000 jobs may queue (max_job_count): 200 s at 500/s
        base = f"http://{ctl.rest_address}"
        wait_for(lambda: httpx.get(f"{base}/ui/login", timeout=2).status_code == 200, what="the dashboard")
        watching = [Viewer(base, pages[i % len(pages)]) for i in range(viewers if kind == "watched" else 0)]
        for v in watching:
            v.start()
        for v in watching:
            v.ready.wait(30)
            if v.error:
                raise RuntimeError(v.error)
        cpu0 = ctl.cpu_secs()
        prof = Profiler(ctl.pid, duration) if profile else None
        with prof if prof is not None else contextlib.nullcontext():
            out = subprocess.run(
                [sys.executable, "-m", "bench.submitter", "--address", ctl.address, "--rate", str(rate),
                 "--duration", str(duration)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
        cpu = ctl.cpu_secs() - cpu0
        if prof is not None:
            print(f"where spurctld spent its time in this {kind} run:")
            prof.print_top(40)
        stats = json.loads(out.stdout.strip().splitlines()[-1])
        for v in watching:
            v.stop.set()
        errors = [v.error for v in watching if v.error]
        if errors:
            raise RuntimeError("; ".join(errors))
        return Run("baseline" if source else "this tree", kind, stats["submit_p50_ms"], stats["submit_p99_ms"], stats["submitted"], cpu,
                   sum(v.events for v in watching))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--viewers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--csv", type=Path, default=RESULTS / "ui_stream.csv")
    parser.add_argument("--profile", action="store_true", help="sample spurctld with py-spy in the watched runs")
    parser.add_argument("--pages", default=",".join(PAGES), help="the pages the viewers watch, in turn")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured in the same rounds")
    args = parser.parse_args(argv)
    trees: list[Path | None] = [None, args.baseline] if args.baseline else [None]
    runs: list[Run] = []
    for _ in range(args.rounds):
        for source in trees:
            for kind in ("plain", "watched"):
                pages = args.pages.split(",")
                profile = args.profile and kind == "watched" and source is None
                runs.append(one_run(kind, args.rate, args.duration, args.viewers, pages, profile, source))
                r = runs[-1]
                print(f"{r.tree:9} {r.kind:8} p50 {r.p50_ms:7.1f} ms  p99 {r.p99_ms:7.1f} ms  "
                      f"{r.live_events} live events", flush=True)  # fmt: skip
    print_table(
        ["tree", "run", "submitted", "p50 ms", "p99 ms", "spurctld CPU s", "live events"],
        [[r.tree, r.kind, r.submitted, f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}", f"{r.controller_cpu_s:.1f}",
          r.live_events] for r in runs],  # fmt: skip
        title=f"SubmitJob at {args.rate}/s for {args.duration:g} s, {args.viewers} live pages in the watched runs",
    )
    for tree in dict.fromkeys(r.tree for r in runs):
        plain = statistics.median(r.p99_ms for r in runs if r.kind == "plain" and r.tree == tree)
        watched = statistics.median(r.p99_ms for r in runs if r.kind == "watched" and r.tree == tree)
        print(f"{tree}: median p99 plain {plain:.1f} ms, watched {watched:.1f} ms, ratio {watched / plain:.3f} "
              "(target <= 1.10)")  # fmt: skip
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["tree", "run", "submitted", "p50_ms", "p99_ms", "controller_cpu_s", "live_events"])
        for r in runs:
            w.writerow([r.tree, r.kind, r.submitted, f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", f"{r.controller_cpu_s:.2f}",
                        r.live_events])  # fmt: skip
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
