"""Shared pieces of the benchmarks: a real spurctld with a chosen config, /proc readings, tables.

Benchmarks print figures and never assert; these helpers raise only when the thing being measured
cannot be started at all.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integration.harness import BIN, Proc, free_port, wait_for

__all__ = [
    "BenchController",
    "controller",
    "proc_cpu_secs",
    "proc_rss_mb",
    "median",
    "percentile",
    "print_table",
    "rpc_call",
    "Profiler",
]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class BenchController:
    """A running spurctld started by :func:`controller`."""

    proc: Proc
    address: str
    root: Path
    rest_address: str = ""

    @property
    def pid(self) -> int:
        assert self.proc.popen is not None
        return self.proc.popen.pid

    def cpu_secs(self) -> float:
        return proc_cpu_secs(self.pid)

    def rss_mb(self) -> float:
        return proc_rss_mb(self.pid)

    def sleeps(self) -> dict[int, int]:
        return proc_sleeps(self.pid)


@contextmanager
def controller(
    *,
    wal_fsync: bool = True,
    heartbeat_interval_secs: int = 30,
    node_timeout_secs: int = 90,
    scheduler_interval_secs: float = 2.0,
    extra: str = "",
    controller_extra: str = "",
    root: Path | None = None,
    source: Path | None = None,
) -> Iterator[BenchController]:
    """Start spurctld on a free loopback port with the given settings; kill it on exit. ``extra`` is
    appended to the file (after ``[scheduler]``), ``controller_extra`` to its ``[controller]`` table.
    With ``source`` (another checkout) the controller imports Spur from there."""
    with tempfile.TemporaryDirectory(prefix="spur-bench-") as tmp:
        base = root or Path(tmp)
        port = free_port()
        rest_port = free_port()
        conf = base / "spur.conf"
        conf.write_text(
            'cluster_name = "bench"\n'
            "[controller]\n"
            f'state_dir = "{base / "state"}"\n'
            f'rest_addr = "127.0.0.1:{rest_port}"\n'
            'metrics_addr = "127.0.0.1:0"\n'
            f"wal_fsync = {'true' if wal_fsync else 'false'}\n"
            f"heartbeat_interval_secs = {heartbeat_interval_secs}\n"
            f"node_timeout_secs = {node_timeout_secs}\n"
            "kill_grace_secs = 2\n" + controller_extra + "[scheduler]\n"
            f"interval_secs = {scheduler_interval_secs}\n" + extra
        )
        env = dict(os.environ)
        env.pop("SPUR_CONF", None)
        if source is not None:  # that checkout's Spur and scheduler plugin
            src = source.resolve()
            env["PYTHONPATH"] = os.pathsep.join([str(src), str(src / "plugins" / "spur-sched-backfill")])
        argv = [str(BIN / "spurctld"), "-f", str(conf), "--listen", f"127.0.0.1:{port}"]
        proc = Proc(argv, base / "spurctld.log", env).start()

        def up() -> bool:
            if not proc.alive():
                raise RuntimeError(f"spurctld exited:\n{proc.log()}")
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True

        try:
            wait_for(up, timeout=30, what="spurctld")
            yield BenchController(proc, f"127.0.0.1:{port}", base, f"127.0.0.1:{rest_port}")
        finally:
            proc.kill()


def proc_cpu_secs(pid: int) -> float:
    """User + system CPU seconds of a process so far (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def proc_sleeps(pid: int) -> dict[int, int]:
    """Thread id -> times that thread of the process has blocked so far (voluntary context switches,
    /proc/<pid>/task/*/status): each block is a wake later, and each wake costs a run-loop pass and
    caches gone cold. :func:`sleeps_between` turns two readings into a count."""
    counts: dict[int, int] = {}
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue  # the thread ended while being read
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                counts[int(status.parent.name)] = int(line.split()[1])
    return counts


def sleeps_between(before: dict[int, int], after: dict[int, int]) -> int:
    """Blocks between two :func:`proc_sleeps` readings: a thread started meanwhile counts from 0; one
    that ended meanwhile (a worker thread retired) takes its blocks since ``before`` with it, a small
    undercount."""
    return sum(n - before.get(tid, 0) for tid, n in after.items())


def proc_rss_mb(pid: int) -> float:
    """Resident set size in MiB (VmRSS from /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in [0, 1]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """Right-aligned plain-text table (floats with up to 2 decimals)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


async def rpc_call(address: str, method: str, request: Any, timeout: float = 30) -> Any:
    """One Controller RPC on a fresh channel (for occasional calls; loops should hold a channel)."""
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        return await getattr(controller_stub(ch), method)(request, timeout=timeout)


class Profiler:
    """``with Profiler(pid, seconds) as p:`` samples ``pid`` with py-spy for ``seconds`` (or until the
    block ends); ``p.print_top(n)`` prints the heaviest Spur/h2 functions, inclusive. Only the thread
    holding the GIL is sampled (``--gil``): a worker thread blocked in fsync, or the event loop in
    ``epoll_wait``, is not CPU and must not count as if it were. Without py-spy
    installed (``.venv/bin/pip install py-spy``) it says so and records nothing."""

    def __init__(self, pid: int, seconds: float, rate: int = 250) -> None:
        self.pid, self.seconds, self.rate = pid, seconds, rate
        self._tmp = tempfile.TemporaryDirectory(prefix="spur-prof-")
        self.raw = Path(self._tmp.name) / "profile.raw"
        self._proc: subprocess.Popen | None = None
        self.text = ""

    def __enter__(self) -> Profiler:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(spy).exists():
            print("(profile skipped: py-spy is not installed)")
            return self
        argv = [spy, "record", "--gil", "-p", str(self.pid), "-d", str(int(self.seconds)), "-r", str(self.rate)]
        self._proc = subprocess.Popen(
            [*argv, "-f", "raw", "-o", str(self.raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=self.seconds + 30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            if self.raw.exists():
                self.text = self.raw.read_text()
        self._tmp.cleanup()

    def top(self, n: int) -> list[tuple[str, str]]:
        """(percent of samples, function) for the ``n`` heaviest functions of interest, inclusive."""
        incl: collections.Counter[str] = collections.Counter()
        total = 0
        for line in self.text.splitlines():
            stack, _, count = line.rpartition(" ")
            k = int(count)
            total += k
            seen = set()
            for frame in stack.split(";")[1:]:
                key = re.sub(r":\d+\)", ")", frame)
                if key not in seen and any(m in key for m in ("spur", "h2/", "hpack/", "fsync", "plan")):
                    incl[key] += k
                    seen.add(key)
        return [(f"{100 * k / max(total, 1):.1f}", f) for f, k in incl.most_common(n)]

    def print_top(self, n: int = 30) -> None:
        if self.text:
            print_table(["% samples", "function (inclusive)"], self.top(n))
