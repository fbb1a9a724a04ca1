from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobRecordsRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "users", "accounts", "partitions", "names", "states", "jobs")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    start_time: float
    end_time: float
    users: _containers.RepeatedScalarFieldContainer[str]
    accounts: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    names: _containers.RepeatedScalarFieldContainer[str]
    states: _containers.RepeatedScalarFieldContainer[str]
    jobs: _containers.RepeatedCompositeFieldContainer[JobSelector]
    def __init__(self, start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., users: _Optional[_Iterable[str]] = ..., accounts: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ..., names: _Optional[_Iterable[str]] = ..., states: _Optional[_Iterable[str]] = ..., jobs: _Optional[_Iterable[_Union[JobSelector, _Mapping]]] = ...) -> None: ...

class JobSelector(_message.Message):
    __slots__ = ("job_id", "has_task", "array_task_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_TASK_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    has_task: bool
    array_task_id: int
    def __init__(self, job_id: _Optional[int] = ..., has_task: _Optional[bool] = ..., array_task_id: _Optional[int] = ...) -> None: ...

class JobRecordsResponse(_message.Message):
    __slots__ = ("jobs", "source")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedScalarFieldContainer[bytes]
    source: str
    def __init__(self, jobs: _Optional[_Iterable[bytes]] = ..., source: _Optional[str] = ...) -> None: ...

class UsageRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "users", "accounts", "top_count")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    TOP_COUNT_FIELD_NUMBER: _ClassVar[int]
    start_time: float
    end_time: float
    users: _containers.RepeatedScalarFieldContainer[str]
    accounts: _containers.RepeatedScalarFieldContainer[str]
    top_count: int
    def __init__(self, start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., users: _Optional[_Iterable[str]] = ..., accounts: _Optional[_Iterable[str]] = ..., top_count: _Optional[int] = ...) -> None: ...

class AssocUsage(_message.Message):
    __slots__ = ("account", "user", "cpu_seconds", "gpu_seconds")
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    account: str
    user: str
    cpu_seconds: float
    gpu_seconds: float
    def __init__(self, account: _Optional[str] = ..., user: _Optional[str] = ..., cpu_seconds: _Optional[float] = ..., gpu_seconds: _Optional[float] = ...) -> None: ...

class UsageResponse(_message.Message):
    __slots__ = ("cluster_name", "start_time", "end_time", "usage", "allocated_cpu_seconds", "reported_cpu_seconds", "down_cpu_seconds")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REPORTED_CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DOWN_CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    start_time: float
    end_time: float
    usage: _containers.RepeatedCompositeFieldContainer[AssocUsage]
    allocated_cpu_seconds: float
    reported_cpu_seconds: float
    down_cpu_seconds: float
    def __init__(self, cluster_name: _Optional[str] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., usage: _Optional[_Iterable[_Union[AssocUsage, _Mapping]]] = ..., allocated_cpu_seconds: _Optional[float] = ..., reported_cpu_seconds: _Optional[float] = ..., down_cpu_seconds: _Optional[float] = ...) -> None: ...

class DiagRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DiagResponse(_message.Message):
    __slots__ = ("server_start_time", "now", "jobs_submitted", "jobs_started", "jobs_completed", "jobs_canceled", "jobs_failed", "jobs_pending", "jobs_running", "database_configured", "database_url", "database_status", "database_error", "schema_version", "outbox_depth", "outbox_dropped", "last_flush_time", "last_flush_records", "records_flushed", "flush_errors", "outbox_enabled", "cluster_name", "cluster_id", "last_flush_rate")
    SERVER_START_TIME_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    JOBS_SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    JOBS_STARTED_FIELD_NUMBER: _ClassVar[int]
    JOBS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    JOBS_CANCELED_FIELD_NUMBER: _ClassVar[int]
    JOBS_FAILED_FIELD_NUMBER: _ClassVar[int]
    JOBS_PENDING_FIELD_NUMBER: _ClassVar[int]
    JOBS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    DATABASE_CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    DATABASE_URL_FIELD_NUMBER: _ClassVar[int]
    DATABASE_STATUS_FIELD_NUMBER: _ClassVar[int]
    DATABASE_ERROR_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_DROPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_FLUSH_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_FLUSH_RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FLUSHED_FIELD_NUMBER: _ClassVar[int]
    FLUSH_ERRORS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_ENABLED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_FLUSH_RATE_FIELD_NUMBER: _ClassVar[int]
    server_start_time: float
    now: float
    jobs_submitted: int
    jobs_started: int
    jobs_completed: int
    jobs_canceled: int
    jobs_failed: int
    jobs_pending: int
    jobs_running: int
    database_configured: bool
    database_url: str
    database_status: str
    database_error: str
    schema_version: int
    outbox_depth: int
    outbox_dropped: int
    last_flush_time: float
    last_flush_records: int
    records_flushed: int
    flush_errors: int
    outbox_enabled: bool
    cluster_name: str
    cluster_id: str
    last_flush_rate: float
    def __init__(self, server_start_time: _Optional[float] = ..., now: _Optional[float] = ..., jobs_submitted: _Optional[int] = ..., jobs_started: _Optional[int] = ..., jobs_completed: _Optional[int] = ..., jobs_canceled: _Optional[int] = ..., jobs_failed: _Optional[int] = ..., jobs_pending: _Optional[int] = ..., jobs_running: _Optional[int] = ..., database_configured: _Optional[bool] = ..., database_url: _Optional[str] = ..., database_status: _Optional[str] = ..., database_error: _Optional[str] = ..., schema_version: _Optional[int] = ..., outbox_depth: _Optional[int] = ..., outbox_dropped: _Optional[int] = ..., last_flush_time: _Optional[float] = ..., last_flush_records: _Optional[int] = ..., records_flushed: _Optional[int] = ..., flush_errors: _Optional[int] = ..., outbox_enabled: _Optional[bool] = ..., cluster_name: _Optional[str] = ..., cluster_id: _Optional[str] = ..., last_flush_rate: _Optional[float] = ...) -> None: ...
