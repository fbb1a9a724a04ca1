"""The version every program prints (``--version`` of the commands and of the daemons, the man pages).

A leaf module: the CLI, spurctld and spurd all import it, and it imports nothing of Spur.
"""

from __future__ import annotations

__all__ = ["REST_VERSIONS", "SLURM_VERSION", "spur_version", "version_line"]

SLURM_VERSION = "22.05.8"
# The slurmrestd API versions Spur serves (spur.rest; named here so the config can check them).
REST_VERSIONS = ("v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42")


def spur_version() -> str:
    """Spur's installed version (``0.0.0`` when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spur")
    except PackageNotFoundError:
        return "0.0.0"


def version_line() -> str:
    """What ``--version`` prints: Slurm's layout first (scripts parse ``slurm X.Y.Z``), then Spur's."""
    return f"slurm {SLURM_VERSION} (spur {spur_version()})"
