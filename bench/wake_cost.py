"""What a thread's sleep costs the work after it: CPU time of one small unit of pure-Python work
(a loop and a dict, about 10 us back to back), done right after the thread slept for each gap.

    python -m bench.wake_cost [--units 300] [--gaps 0,0.5,2,5,20] [--busy-core]

A controller at moderate load sleeps between events and pays this on every wake; at high load events
pile up and it does not sleep (``spur.controller.pacing``). ``--busy-core`` runs a spinner at the
lowest priority (SCHED_IDLE) on every other core meanwhile, so no core of the machine goes idle:
what changes then is what the machine (a virtual one, its host) does to a core that idles. The
figures are medians of CPU time per unit (``time.thread_time_ns``), in microseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench.common import print_table


def _unit() -> int:
    total = 0
    for i in range(200):
        total += i * i
    return total


def cost_after(gap_ms: float, units: int) -> float:
    """Median CPU microseconds of one unit of work done right after sleeping ``gap_ms`` (0: back to back)."""
    costs = []
    for _ in range(units):
        if gap_ms:
            time.sleep(gap_ms / 1000)
        began = time.thread_time_ns()
        _unit()
        costs.append((time.thread_time_ns() - began) / 1000)
    return statistics.median(costs)


def _spinners(cores: set[int]) -> list[subprocess.Popen]:
    """A lowest-priority busy loop on each of ``cores``."""
    procs = []
    for other in sorted(cores):
        code = f"import os; os.sched_setaffinity(0, {{{other}}}); os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True: pass"
        procs.append(subprocess.Popen([sys.executable, "-c", code]))
    return procs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=300, help="units of work measured per gap")
    ap.add_argument("--gaps", default="0,0.5,2,5,20", help="milliseconds slept before each unit")
    ap.add_argument(
        "--busy-core", action="store_true", help="keep every other core busy at the lowest priority"
    )
    args = ap.parse_args(argv)
    cores = os.sched_getaffinity(0)
    core = min(cores)
    os.sched_setaffinity(0, {core})
    spinners = _spinners(cores - {core}) if args.busy_core else []
    try:
        time.sleep(0.2 if spinners else 0)
        _unit()  # warm up the code once
        rows = []
        base = 0.0
        for gap in (float(g) for g in args.gaps.split(",")):
            cost = cost_after(gap, args.units if gap else 10 * args.units)
            base = base or cost
            rows.append((f"{gap:g}", f"{cost:.1f}", f"{cost / base:.2f}x"))
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    where = "every other core kept busy" if spinners else "the other cores left alone"
    print(f"one unit of work on core {core} after its thread slept ({where}), {os.cpu_count()} cores here")
    print_table(["slept ms", "CPU us per unit (median)", "vs back to back"], rows)


if __name__ == "__main__":
    main()
