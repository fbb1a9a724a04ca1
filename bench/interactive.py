"""Interactive latency: whole-command wall time of ``srun true``, ``salloc -n1 true`` and
``sbatch --wait --wrap true`` on an idle one-node cluster, and where one ``srun true`` spends it.

    python -m bench.interactive [--repeat 7]

Starts a real spurctld (default scheduler settings, WAL fsync on) and one spurd (process backend,
2 CPUs), both with ``SPUR_TRACE=1`` (spans of each job's way in their logs, see ``spur.trace``). Bytecode
is compiled first (``compileall``), as an installed Spur has it, and the commands run without
``PYTHONDONTWRITEBYTECODE``. Prints the median (and min/max) of ``--repeat`` runs of each command beside
``python -c pass`` and ``python -c 'import spur.cli.main'``, then the breakdown of the median
``srun true``: every span of its job from the CLI (its stderr) and both daemons (their logs), as
milliseconds from the command's exec. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import controller, print_table
from bench.latency import start_agent
from integration.harness import BIN, wait_for

ROOT = Path(__file__).resolve().parent.parent
SPAN = re.compile(r"trace job=(\d+) (\S+) t=([0-9.]+)")


def _env(ctl_address: str) -> dict[str, str]:
    env = dict(os.environ, SPUR_CONTROLLER=ctl_address, SPUR_TRACE="1")
    env.pop("SPUR_CONF", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, str]:
    """(exec wall time, duration s, stderr) of one run; fails loudly on a non-zero exit."""
    began_wall, began = time.time(), time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - began
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
    return began_wall, took, out.stderr


def _spans(text: str) -> dict[int, list[tuple[str, float]]]:
    found: dict[int, list[tuple[str, float]]] = {}
    for job, name, t in SPAN.findall(text):
        found.setdefault(int(job), []).append((name, float(t)))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.interactive", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    compileall.compile_dir(str(ROOT / "spur"), quiet=1)
    for plugin in (ROOT / "plugins").iterdir():
        compileall.compile_dir(str(plugin), quiet=1)
    os.environ["SPUR_TRACE"] = "1"  # the daemons inherit it
    work = tempfile.mkdtemp(prefix="spur-interactive-")
    py = sys.executable
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import spur.cli.main'": [py, "-c", "import spur.cli.main"],
        "srun true": [str(BIN / "srun"), "true"],
        "salloc -n1 true": [str(BIN / "salloc"), "-n1", "true"],
        "sbatch --wait --wrap true": [str(BIN / "sbatch"), "--wait", "-o", "/dev/null", "--wrap", "true"],
    }
    with controller() as ctl:
        agent = start_agent(ctl, cpus=2)
        env = _env(ctl.address)
        try:
            wait_for(
                lambda: "idle" in subprocess.run(
                    [str(BIN / "sinfo"), "-h", "-o", "%t"], env=env, capture_output=True, text=True
                ).stdout,
                timeout=30,
                what="the node to be idle",
            )
            runs: dict[str, list[tuple[float, float, str]]] = {name: [] for name in commands}
            for _ in range(args.repeat):
                for name, cmd in commands.items():
                    runs[name].append(_timed(cmd, env, work))
            rows = []
            for name, got in runs.items():
                took = [t for _, t, _ in got]
                rows.append((name, f"{1000 * statistics.median(took):.0f}", f"{1000 * min(took):.0f}",
                             f"{1000 * max(took):.0f}"))
            print_table(["command", "median ms", "min ms", "max ms"], rows,
                        title=f"whole-command wall time, {args.repeat} runs each, idle 1-node cluster")

            srun_runs = sorted(runs["srun true"], key=lambda r: r[1])
            began, took, stderr = srun_runs[len(srun_runs) // 2]
            cli = _spans(stderr)
            job_id = next(iter(cli))
            daemons = _spans(Path(ctl.root / "spurctld.log").read_text() + agent.log())
            spans = sorted(cli[job_id] + daemons.get(job_id, []), key=lambda s: s[1])
            rows = [("exec", "0.0", "")]
            previous = 0.0
            for name, t in spans:
                at = 1000 * (t - began)
                rows.append((name, f"{at:.1f}", f"+{at - previous:.1f}"))
                previous = at
            rows.append(("exit (command returned)", f"{1000 * took:.1f}", f"+{1000 * took - previous:.1f}"))
            print_table(["span", "ms from exec", "step"], rows,
                        title=f"median srun true (job {job_id}): where its {1000 * took:.0f} ms go")
        finally:
            agent.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
