#!/usr/bin/env bash
# Install everything the tests need, then run lint and the whole test suite (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m mypy  # the packages and strictness in pyproject.toml [tool.mypy]
# pytest-timeout fails any single test that hangs (timeout in pyproject.toml); the outer limit interrupts
# the run as a whole (SIGINT, so pytest still prints what failed) well inside CI's 90 minutes.
# A failed test is run once more (shown as R and listed as "rerun" in the summary): on a loaded 2-core
# machine a timing-sensitive multi-process test can lose a race once; a test that fails twice fails the run.
# SPUR_COVERAGE=1 (CI, .ci/run) measures branch coverage, subprocesses included ([tool.coverage.*] in
# pyproject.toml), then prints it per package and fails below the floor (scripts/coverage_report.py).
cov=()
if [ -n "${SPUR_COVERAGE:-}" ]; then
  # One data file per process, in a directory every user can write to: tests run commands and jobs
  # as other uids, and a process that cannot save its data would print coverage's error on exit.
  rm -rf .coverage-data
  mkdir -m 1777 .coverage-data
  export COVERAGE_FILE="$PWD/.coverage-data/.coverage"
  cov=(--cov --cov-report=)
fi
rc=0
timeout --signal=INT --kill-after=120 "${SPUR_TEST_LIMIT_S:-3600}" \
  .venv/bin/python -m pytest -q -p no:cacheprovider --reruns 1 --reruns-delay 2 -rR "${cov[@]}" "$@" || rc=$?
if [ -n "${SPUR_COVERAGE:-}" ]; then
  .venv/bin/python scripts/coverage_report.py || { [ "$rc" -ne 0 ] || rc=1; }
fi
exit "$rc"
