from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Entry(_message.Message):
    __slots__ = ("index", "term", "data")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    data: bytes
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class RequestVoteRequest(_message.Message):
    __slots__ = ("term", "candidate_id", "last_log_index", "last_log_term", "pre_vote")
    TERM_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    term: int
    candidate_id: int
    last_log_index: int
    last_log_term: int
    pre_vote: bool
    def __init__(self, term: _Optional[int] = ..., candidate_id: _Optional[int] = ..., last_log_index: _Optional[int] = ..., last_log_term: _Optional[int] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class RequestVoteResponse(_message.Message):
    __slots__ = ("term", "vote_granted")
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTE_GRANTED_FIELD_NUMBER: _ClassVar[int]
    term: int
    vote_granted: bool
    def __init__(self, term: _Optional[int] = ..., vote_granted: _Optional[bool] = ...) -> None: ...

class AppendEntriesRequest(_message.Message):
    __slots__ = ("term", "leader_id", "prev_log_index", "prev_log_term", "entries", "leader_commit")
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    PREV_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREV_LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LEADER_COMMIT_FIELD_NUMBER: _ClassVar[int]
    term: int
    leader_id: int
    prev_log_index: int
    prev_log_term: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    leader_commit: int
    def __init__(self, term: _Optional[int] = ..., leader_id: _Optional[int] = ..., prev_log_index: _Optional[int] = ..., prev_log_term: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., leader_commit: _Optional[int] = ...) -> None: ...

class AppendEntriesResponse(_message.Message):
    __slots__ = ("term", "success", "match_index", "conflict_index", "conflict_term", "storage_failed")
    TERM_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_TERM_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FAILED_FIELD_NUMBER: _ClassVar[int]
    term: int
    success: bool
    match_index: int
    conflict_index: int
    conflict_term: int
    storage_failed: bool
    def __init__(self, term: _Optional[int] = ..., success: _Optional[bool] = ..., match_index: _Optional[int] = ..., conflict_index: _Optional[int] = ..., conflict_term: _Optional[int] = ..., storage_failed: _Optional[bool] = ...) -> None: ...

class InstallSnapshotRequest(_message.Message):
    __slots__ = ("term", "leader_id", "last_index", "last_term", "offset", "data", "done")
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_TERM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    term: int
    leader_id: int
    last_index: int
    last_term: int
    offset: int
    data: bytes
    done: bool
    def __init__(self, term: _Optional[int] = ..., leader_id: _Optional[int] = ..., last_index: _Optional[int] = ..., last_term: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., done: _Optional[bool] = ...) -> None: ...

class InstallSnapshotResponse(_message.Message):
    __slots__ = ("term", "next_offset")
    TERM_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    term: int
    next_offset: int
    def __init__(self, term: _Optional[int] = ..., next_offset: _Optional[int] = ...) -> None: ...
