"""Raft consensus: durable log storage (WAL + snapshots) and the Raft member driving a state machine."""

from spur.raft.node import NotLeader, RaftNode, Role, StateMachine
from spur.raft.storage import CorruptLogError, HardState, LogEntry, RaftStorage, Snapshot, StorageError

__all__ = [
    "CorruptLogError",
    "HardState",
    "LogEntry",
    "NotLeader",
    "RaftNode",
    "RaftStorage",
    "Role",
    "Snapshot",
    "StateMachine",
    "StorageError",
]
