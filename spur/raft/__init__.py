"""Raft consensus: durable log storage (WAL + snapshots), elections, replication, snapshots, ReadIndex."""

from spur.raft.faults import FaultSwitch
from spur.raft.node import NotLeader, RaftNode, Role, StateMachine
from spur.raft.storage import CorruptLogError, HardState, LogEntry, RaftStorage, Snapshot, StorageError
from spur.raft.transport import RAFT_SERVICE, RaftService

__all__ = [
    "RAFT_SERVICE",
    "CorruptLogError",
    "FaultSwitch",
    "HardState",
    "LogEntry",
    "NotLeader",
    "RaftNode",
    "RaftService",
    "RaftStorage",
    "Role",
    "Snapshot",
    "StateMachine",
    "StorageError",
]
