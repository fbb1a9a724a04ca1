"""MPI plugin types srun offers (``--mpi``, ``MpiDefault``), as Slurm names them.

``none``: tasks start with no process-management interface (``mpirun`` inside an allocation brings
its own). ``pmi2``: the step launcher on each node serves PMI-2 (and PMI-1) to its tasks over
``PMI_FD`` (:mod:`spur.core.pmi`). PMIx is not offered: no PMIx server library is reachable from Python.
"""

from __future__ import annotations

MPI_TYPES = ("none", "pmi2")


def check_mpi_type(value: str) -> str:
    """``value`` when it names an offered type; ValueError with Slurm's wording otherwise."""
    if value not in MPI_TYPES:
        raise ValueError(
            f'MPI plugin type "{value}" is not available (srun --mpi=list shows: {", ".join(MPI_TYPES)})'
        )
    return value


def mpi_list_text() -> str:
    """What ``srun --mpi=list`` prints (Slurm's layout: a heading, then one tab-indented type a line)."""
    return "MPI plugin types are...\n" + "".join(f"\t{name}\n" for name in MPI_TYPES)
