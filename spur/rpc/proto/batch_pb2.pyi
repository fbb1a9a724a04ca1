from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ItemOutcome(_message.Message):
    __slots__ = ("code", "message", "already_running", "job_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RUNNING_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    already_running: bool
    job_id: int
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., already_running: _Optional[bool] = ..., job_id: _Optional[int] = ...) -> None: ...

class LaunchJobsRequest(_message.Message):
    __slots__ = ("launches",)
    LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    launches: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, launches: _Optional[_Iterable[bytes]] = ...) -> None: ...

class JobStatusReports(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, reports: _Optional[_Iterable[bytes]] = ...) -> None: ...

class SubmitJobsRequest(_message.Message):
    __slots__ = ("submissions",)
    SUBMISSIONS_FIELD_NUMBER: _ClassVar[int]
    submissions: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, submissions: _Optional[_Iterable[bytes]] = ...) -> None: ...

class BatchOutcomes(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[ItemOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[ItemOutcome, _Mapping]]] = ...) -> None: ...
