#!/usr/bin/env bash
# Create .venv and install Spur, its plugins and the development tools into it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is required (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
# PostgreSQL (accounting tests start a private cluster with its initdb/pg_ctl): Debian's package.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: PostgreSQL not found; running: apt-get install -y postgresql" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  else
    echo "setup: PostgreSQL not found and not root: accounting tests will be skipped (install postgresql)" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.spur-installed
want=$(cat pyproject.toml plugins/*/pyproject.toml | sha1sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Spur and its dependencies into .venv (log: .venv/install.log)" >&2
  {
    .venv/bin/python -m pip install --upgrade pip &&
    .venv/bin/python -m pip install -e '.[dev]' &&
    for plugin in plugins/*/; do
      .venv/bin/python -m pip install --no-deps -e "$plugin" || exit 1
    done
  } > .venv/install.log 2>&1 || { tail -n 40 .venv/install.log >&2; echo "setup: install failed" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
