"""The CLI never loads the daemons' web and metrics stacks (quart, hypercorn, prometheus_client)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("quart", "quart_trio", "hypercorn", "prometheus_client", "trio_websocket", "werkzeug")


def imported_modules(code: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize(
    "code",
    [
        "import spur.cli.squeue",
        "import spur.cli.sattach",
        "import sys; from spur.cli.main import main; sys.argv = ['squeue', '--help']; main()",
        "import sys; from spur.cli.main import main; main(['sattach', '--help'])",
    ],
)
def test_cli_does_not_import_web_or_metrics_modules(code: str) -> None:
    names = imported_modules(code)
    assert "spur.cli.main" in names or "spur.cli.squeue" in names or "spur.cli.sattach" in names
    loaded = sorted(n for n in names if n.split(".")[0] in HEAVY)
    assert loaded == [], f"the CLI imported {loaded}"
