"""Domains of the replicated state: the way ``ClusterState`` grows without becoming one big class.

A domain (node admission, accounting entities, the accounting outbox, the WireGuard mesh, the k0s
cluster record, ...) owns its own data and its own commands. ``ClusterState`` stays a dispatcher: it
routes each command to the domain that declared it, puts every domain's data into the snapshot under
the domain's name, and tells every domain when a job reaches a terminal state.

Contract for a domain (subclass :class:`StateDomain` and list the class in ``spur.state.domains``):

- ``name``: unique key of its data in snapshots; never renamed (old snapshots are read by it).
- ``commands``: the command dataclasses it applies. They are registered in the log codec, so their
  class names must be unique across the whole state machine.
- ``apply(cmd)``: pure and deterministic, like every apply: it reads only the command (the leader
  stamped times and identities into it), the domain's own data and read-only queries on
  ``self.state``; it returns a result, or :class:`Rejected` for a client's mistake
  (never raises for one), and on rejection it has changed nothing.
- ``snapshot()`` returns JSON-ready data; ``restore(body)`` rebuilds from it, where ``body`` is None
  for a snapshot written before the domain existed (start empty).
- ``on_job_finished(job)``: called once, inside the apply that made ``job`` terminal (completed,
  failed, cancelled, timed out, ...), before the job may be dropped from the embedded history. It must
  not change the job; it may record what it needs.

A domain never reaches into another domain's data: it asks ``self.state`` (the dispatcher) for
jobs, nodes and partitions through their query methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from spur.core.job import Job, Node, Partition


@dataclass
class Rejected:
    """A command the state refused; ``code`` is a gRPC status name, ``message`` is for the user."""

    code: str
    message: str


class StateQueries(Protocol):
    """What a domain may read of the dispatcher (``spur.state.machine.ClusterState``), never change."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def jobs(self) -> dict[int, Job]: ...

    @property
    def nodes(self) -> dict[str, Node]: ...

    @property
    def partitions(self) -> dict[str, Partition]: ...

    def active_jobs(self) -> list[Job]: ...


class StateDomain:
    """Base class of a state domain (see the module docstring for the contract)."""

    name: ClassVar[str] = ""
    commands: ClassVar[tuple[type, ...]] = ()

    def __init__(self, state: StateQueries) -> None:
        self.state = state

    def apply(self, cmd: Any) -> Any:
        """Apply one of ``commands``; the default dispatches to ``_apply_<ClassName>``."""
        return getattr(self, f"_apply_{type(cmd).__name__}")(cmd)

    def snapshot(self) -> Any:
        raise NotImplementedError(f"state domain {self.name!r} must implement snapshot()")

    def restore(self, body: Any | None) -> None:
        raise NotImplementedError(f"state domain {self.name!r} must implement restore()")

    def on_job_finished(self, job: Job) -> None:
        """A job became terminal in this apply (default: nothing to record)."""
