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
# Branch coverage ([tool.coverage.*] in pyproject.toml, subprocesses included) is printed per package
# and checked against a floor by scripts/coverage_report.py:
# - by default (CI): the unit tests (tests/) run measured, which costs about a minute, and their figure
#   must stay above [tool.spur.coverage] unit_floor; the integration tests then run unmeasured (tracing
#   every daemon they start roughly doubles their time on a 2-core machine);
# - SPUR_COVERAGE=1: the whole suite runs measured, checked against [tool.coverage.report] fail_under;
# - with arguments (bash scripts/test.sh tests/test_x.py -k y): just those, measured only with SPUR_COVERAGE=1.
run_pytest() {
  timeout --signal=INT --kill-after=120 "${SPUR_TEST_LIMIT_S:-3600}" \
    .venv/bin/python -m pytest -q -p no:cacheprovider --reruns 1 --reruns-delay 2 -rR "$@"
}
measured() {
  # One data file per process, in a directory every user can write to: tests run commands and jobs
  # as other uids, and a process that cannot save its data would print coverage's error on exit.
  rm -rf .coverage-data
  mkdir -m 1777 .coverage-data
  COVERAGE_FILE="$PWD/.coverage-data/.coverage" run_pytest --cov --cov-report= --cov-fail-under=0 "$@"
}
report() {
  COVERAGE_FILE="$PWD/.coverage-data/.coverage" .venv/bin/python scripts/coverage_report.py "$@"
}
rc=0
if [ -n "${SPUR_COVERAGE:-}" ]; then
  measured "$@" || rc=$?
  report --scope full || { [ "$rc" -ne 0 ] || rc=1; }
elif [ "$#" -gt 0 ]; then
  run_pytest "$@" || rc=$?
else
  measured tests || rc=$?
  report --scope unit || { [ "$rc" -ne 0 ] || rc=1; }
  run_pytest integration || { code=$?; [ "$rc" -ne 0 ] || rc=$code; }
fi
exit "$rc"
