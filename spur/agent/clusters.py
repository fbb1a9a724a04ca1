"""Where spurd keeps state per cluster id: job dirs, tombstones, the node credential.

Layout under the agent's state dir::

    cluster_id                      id of the cluster whose launches the agent serves now
    clusters/<id>/jobs/             job dirs of that cluster (see spur.agent.jobdir)
    clusters/<id>/done/             tombstones of its units that ended and were reported
    clusters/<id>/node_credential   its node credential ([admission] mode = "token"), mode 0600
    jobs/, done/                    state written before cluster ids: the "unknown cluster" ("")

A cluster id is a controller-chosen random hex string; anything else is refused (it becomes a path).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from spur.agent.private_files import write_private

__all__ = ["ClusterDirs", "valid_cluster_id"]

_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
CURRENT_FILE = "cluster_id"
CREDENTIAL_FILE = "node_credential"


def valid_cluster_id(cluster_id: str) -> bool:
    return bool(_ID.match(cluster_id))


class ClusterDirs:
    """Paths of per-cluster agent state under ``state_dir`` (see the module docstring)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def root(self, cluster_id: str) -> Path:
        if not cluster_id:
            return self.state_dir
        if not valid_cluster_id(cluster_id):
            raise ValueError(f"invalid cluster id {cluster_id!r}")
        return self.state_dir / "clusters" / cluster_id

    def jobs_dir(self, cluster_id: str) -> Path:
        return self.root(cluster_id) / "jobs"

    def done_dir(self, cluster_id: str) -> Path:
        return self.root(cluster_id) / "done"

    def current(self) -> str:
        """The cluster recorded as current ("" when none was recorded or the record is unusable)."""
        try:
            text = (self.state_dir / CURRENT_FILE).read_text().strip()
        except OSError:
            return ""
        return text if valid_cluster_id(text) else ""

    def set_current(self, cluster_id: str) -> None:
        """Record ``cluster_id`` as current (atomically) and create its directories."""
        root = self.root(cluster_id)
        (root / "jobs").mkdir(parents=True, exist_ok=True)
        (root / "done").mkdir(parents=True, exist_ok=True)
        write_private(self.state_dir / CURRENT_FILE, cluster_id + "\n", 0o644)

    def known(self) -> list[str]:
        """Every cluster with state here: "" (the unknown cluster) first, then the ids in name order."""
        ids = [""]
        with contextlib.suppress(OSError):
            ids += sorted(p.name for p in (self.state_dir / "clusters").iterdir() if valid_cluster_id(p.name))
        return ids

    def read_credential(self, cluster_id: str) -> str:
        """The node credential this agent holds for ``cluster_id`` ("" when none)."""
        if not cluster_id:
            return ""
        try:
            return (self.root(cluster_id) / CREDENTIAL_FILE).read_text().strip()
        except (OSError, ValueError):
            return ""

    def write_credential(self, cluster_id: str, credential: str) -> None:
        """Keep ``credential`` for ``cluster_id`` in a file only the agent's user can read (0600)."""
        root = self.root(cluster_id)
        root.mkdir(parents=True, exist_ok=True)
        write_private(root / CREDENTIAL_FILE, credential + "\n", 0o600)


