"""Print the branch coverage of spur/ per package from the coverage data of a test run; exit 1 when
the total is below the floor of its scope in pyproject.toml: ``--scope full`` (the whole suite,
``[tool.coverage.report] fail_under``) or ``--scope unit`` (tests/ alone, ``[tool.spur.coverage]
unit_floor``).

Run by scripts/test.sh after a measured run (the unit tests in every run, the whole suite with
SPUR_COVERAGE=1): combines the data files the test
process and its subprocesses wrote (``COVERAGE_FILE``'s directory), then reads coverage's JSON report. A package is ``spur.X`` (the
modules directly in spur/ count as ``spur``); its figure is coverage's own: covered lines and branches
over all lines and branches.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_of(path: str) -> str:
    parts = Path(path).parts
    i = parts.index("spur")
    return "spur" if len(parts) - i <= 2 else f"spur.{parts[i + 1]}"


def by_package(files: dict[str, dict]) -> dict[str, list[int]]:
    """package -> [statements, covered statements, branches, covered branches]."""
    totals: dict[str, list[int]] = {}
    for path, data in files.items():
        s = data["summary"]
        row = totals.setdefault(package_of(path), [0, 0, 0, 0])
        row[0] += s["num_statements"]
        row[1] += s["covered_lines"]
        row[2] += s.get("num_branches", 0)
        row[3] += s.get("covered_branches", 0)
    return totals


def percent(row: list[int]) -> float:
    total = row[0] + row[2]
    return 100.0 * (row[1] + row[3]) / total if total else 100.0


def floor_of(scope: str, pyproject: dict) -> float:
    """The coverage floor (percent) of ``scope`` ("unit" or "full") from pyproject.toml's tables."""
    if scope == "unit":
        return float(pyproject["tool"]["spur"]["coverage"]["unit_floor"])
    return float(pyproject["tool"]["coverage"]["report"]["fail_under"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scope", choices=("unit", "full"), default="full")
    args = parser.parse_args()
    coverage = [sys.executable, "-m", "coverage"]
    data_file = Path(os.environ.get("COVERAGE_FILE", ROOT / ".coverage"))
    if list(data_file.parent.glob(data_file.name + ".*")):
        subprocess.run([*coverage, "combine", "-q"], cwd=ROOT, check=True)
    if not data_file.exists():
        print("coverage: no data (was the run measured? SPUR_COVERAGE=1 bash scripts/test.sh)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        subprocess.run([*coverage, "json", "-q", "-o", str(out), "--fail-under=0"], cwd=ROOT, check=True)
        report = json.loads(out.read_text())
    rows = by_package(report["files"])
    print(f"{'package':<18} {'stmts':>7} {'miss':>6} {'branch':>7} {'bmiss':>6} {'cover':>7}")
    for name in sorted(rows, key=lambda n: percent(rows[n])):
        r = rows[name]
        print(f"{name:<18} {r[0]:>7} {r[0] - r[1]:>6} {r[2]:>7} {r[2] - r[3]:>6} {percent(r):>6.1f}%")
    total = [sum(r[i] for r in rows.values()) for i in range(4)]
    figure = float(report["totals"]["percent_covered"])
    print(f"{'TOTAL':<18} {total[0]:>7} {total[0] - total[1]:>6} {total[2]:>7} {total[2] - total[3]:>6} {figure:>6.1f}%")
    floor = floor_of(args.scope, tomllib.loads((ROOT / "pyproject.toml").read_text()))
    where = "[tool.spur.coverage] unit_floor" if args.scope == "unit" else "[tool.coverage.report] fail_under"
    what = "the unit tests'" if args.scope == "unit" else "the whole suite's"
    if figure < floor:
        print(f"coverage: FAIL: {what} branch coverage {figure:.1f}% is below the floor of {floor}% ({where})")
        return 1
    print(f"coverage: {what} branch coverage {figure:.1f}% (floor {floor}%, pyproject.toml {where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
