from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GpuDevice(_message.Message):
    __slots__ = ("index", "vendor", "model", "pci_bus_id")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    index: int
    vendor: str
    model: str
    pci_bus_id: str
    def __init__(self, index: _Optional[int] = ..., vendor: _Optional[str] = ..., model: _Optional[str] = ..., pci_bus_id: _Optional[str] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("name", "script", "argv", "work_dir", "stdout_pattern", "stderr_pattern", "stdin_path", "environment", "partition", "num_nodes", "num_tasks", "cpus_per_task", "mem_per_node_mb", "gres", "time_limit_secs", "interactive", "account", "gpus_total", "nice", "nodelist", "exclude", "exclusive", "mem_per_cpu_mb", "ntasks_per_node", "hold", "comment", "constraint", "command", "array", "dependency", "begin_time", "no_requeue", "signal", "open_mode", "qos", "wckey", "gpus_per_task", "kill_on_invalid_dep", "ntasks_per_gpu", "allocation_only", "alloc_sid", "submit_line")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDIN_PATH_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_NODE_MB_FIELD_NUMBER: _ClassVar[int]
    GRES_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECS_FIELD_NUMBER: _ClassVar[int]
    INTERACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    GPUS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    MEM_PER_CPU_MB_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    NO_REQUEUE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    OPEN_MODE_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    WCKEY_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    KILL_ON_INVALID_DEP_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ONLY_FIELD_NUMBER: _ClassVar[int]
    ALLOC_SID_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_LINE_FIELD_NUMBER: _ClassVar[int]
    name: str
    script: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    work_dir: str
    stdout_pattern: str
    stderr_pattern: str
    stdin_path: str
    environment: _containers.ScalarMap[str, str]
    partition: str
    num_nodes: int
    num_tasks: int
    cpus_per_task: int
    mem_per_node_mb: int
    gres: _containers.RepeatedScalarFieldContainer[str]
    time_limit_secs: int
    interactive: bool
    account: str
    gpus_total: int
    nice: int
    nodelist: _containers.RepeatedScalarFieldContainer[str]
    exclude: _containers.RepeatedScalarFieldContainer[str]
    exclusive: bool
    mem_per_cpu_mb: int
    ntasks_per_node: int
    hold: bool
    comment: str
    constraint: _containers.RepeatedScalarFieldContainer[str]
    command: str
    array: str
    dependency: str
    begin_time: float
    no_requeue: bool
    signal: str
    open_mode: str
    qos: str
    wckey: str
    gpus_per_task: int
    kill_on_invalid_dep: bool
    ntasks_per_gpu: int
    allocation_only: bool
    alloc_sid: int
    submit_line: str
    def __init__(self, name: _Optional[str] = ..., script: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., work_dir: _Optional[str] = ..., stdout_pattern: _Optional[str] = ..., stderr_pattern: _Optional[str] = ..., stdin_path: _Optional[str] = ..., environment: _Optional[_Mapping[str, str]] = ..., partition: _Optional[str] = ..., num_nodes: _Optional[int] = ..., num_tasks: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., mem_per_node_mb: _Optional[int] = ..., gres: _Optional[_Iterable[str]] = ..., time_limit_secs: _Optional[int] = ..., interactive: _Optional[bool] = ..., account: _Optional[str] = ..., gpus_total: _Optional[int] = ..., nice: _Optional[int] = ..., nodelist: _Optional[_Iterable[str]] = ..., exclude: _Optional[_Iterable[str]] = ..., exclusive: _Optional[bool] = ..., mem_per_cpu_mb: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., hold: _Optional[bool] = ..., comment: _Optional[str] = ..., constraint: _Optional[_Iterable[str]] = ..., command: _Optional[str] = ..., array: _Optional[str] = ..., dependency: _Optional[str] = ..., begin_time: _Optional[float] = ..., no_requeue: _Optional[bool] = ..., signal: _Optional[str] = ..., open_mode: _Optional[str] = ..., qos: _Optional[str] = ..., wckey: _Optional[str] = ..., gpus_per_task: _Optional[int] = ..., kill_on_invalid_dep: _Optional[bool] = ..., ntasks_per_gpu: _Optional[int] = ..., allocation_only: _Optional[bool] = ..., alloc_sid: _Optional[int] = ..., submit_line: _Optional[str] = ...) -> None: ...

class StepSpec(_message.Message):
    __slots__ = ("argv", "name", "num_tasks", "num_nodes", "cpus_per_task", "stdout_pattern", "stderr_pattern", "environment", "unbuffered", "label", "overlap", "work_dir", "nodelist", "ntasks_per_node", "kill_on_bad_exit", "mpi")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATTERN_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    UNBUFFERED_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    WORK_DIR_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    KILL_ON_BAD_EXIT_FIELD_NUMBER: _ClassVar[int]
    MPI_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    name: str
    num_tasks: int
    num_nodes: int
    cpus_per_task: int
    stdout_pattern: str
    stderr_pattern: str
    environment: _containers.ScalarMap[str, str]
    unbuffered: bool
    label: bool
    overlap: bool
    work_dir: str
    nodelist: _containers.RepeatedScalarFieldContainer[str]
    ntasks_per_node: int
    kill_on_bad_exit: bool
    mpi: str
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., num_tasks: _Optional[int] = ..., num_nodes: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., stdout_pattern: _Optional[str] = ..., stderr_pattern: _Optional[str] = ..., environment: _Optional[_Mapping[str, str]] = ..., unbuffered: _Optional[bool] = ..., label: _Optional[bool] = ..., overlap: _Optional[bool] = ..., work_dir: _Optional[str] = ..., nodelist: _Optional[_Iterable[str]] = ..., ntasks_per_node: _Optional[int] = ..., kill_on_bad_exit: _Optional[bool] = ..., mpi: _Optional[str] = ...) -> None: ...

class StepInfo(_message.Message):
    __slots__ = ("step_id", "spec", "state", "start_time", "end_time", "exit_code", "signal", "allocation", "exited_nodes")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    EXITED_NODES_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    spec: StepSpec
    state: str
    start_time: float
    end_time: float
    exit_code: int
    signal: int
    allocation: _containers.RepeatedCompositeFieldContainer[NodeAllocation]
    exited_nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, step_id: _Optional[int] = ..., spec: _Optional[_Union[StepSpec, _Mapping]] = ..., state: _Optional[str] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., allocation: _Optional[_Iterable[_Union[NodeAllocation, _Mapping]]] = ..., exited_nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeAllocation(_message.Message):
    __slots__ = ("node", "cpus", "mem_mb", "gpus", "tasks")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    node: str
    cpus: int
    mem_mb: int
    gpus: _containers.RepeatedScalarFieldContainer[int]
    tasks: int
    def __init__(self, node: _Optional[str] = ..., cpus: _Optional[int] = ..., mem_mb: _Optional[int] = ..., gpus: _Optional[_Iterable[int]] = ..., tasks: _Optional[int] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "spec", "user", "uid", "gid", "state", "reason", "submit_time", "start_time", "end_time", "allocation", "exit_code", "signal", "partition", "time_limit_secs", "priority", "nodelist", "group", "array_job_id", "array_task_id", "array_max_running", "array_task_count", "array_task_min", "array_task_max", "dependency", "eligible_time", "steps", "restarts", "suspend_time", "suspended_secs", "submit_host")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ARRAY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_MIN_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_MAX_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_TIME_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_TIME_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_SECS_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_HOST_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    spec: JobSpec
    user: str
    uid: int
    gid: int
    state: str
    reason: str
    submit_time: float
    start_time: float
    end_time: float
    allocation: _containers.RepeatedCompositeFieldContainer[NodeAllocation]
    exit_code: int
    signal: int
    partition: str
    time_limit_secs: int
    priority: int
    nodelist: str
    group: str
    array_job_id: int
    array_task_id: int
    array_max_running: int
    array_task_count: int
    array_task_min: int
    array_task_max: int
    dependency: str
    eligible_time: float
    steps: _containers.RepeatedCompositeFieldContainer[StepInfo]
    restarts: int
    suspend_time: float
    suspended_secs: float
    submit_host: str
    def __init__(self, job_id: _Optional[int] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., submit_time: _Optional[float] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., allocation: _Optional[_Iterable[_Union[NodeAllocation, _Mapping]]] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., partition: _Optional[str] = ..., time_limit_secs: _Optional[int] = ..., priority: _Optional[int] = ..., nodelist: _Optional[str] = ..., group: _Optional[str] = ..., array_job_id: _Optional[int] = ..., array_task_id: _Optional[int] = ..., array_max_running: _Optional[int] = ..., array_task_count: _Optional[int] = ..., array_task_min: _Optional[int] = ..., array_task_max: _Optional[int] = ..., dependency: _Optional[str] = ..., eligible_time: _Optional[float] = ..., steps: _Optional[_Iterable[_Union[StepInfo, _Mapping]]] = ..., restarts: _Optional[int] = ..., suspend_time: _Optional[float] = ..., suspended_secs: _Optional[float] = ..., submit_host: _Optional[str] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("name", "address", "port", "cpus", "memory_mb", "gpus", "state", "reason", "alloc_cpus", "alloc_mem_mb", "alloc_gpus", "last_heartbeat", "registered_time", "partitions", "version", "boot_time", "features", "sockets", "cores_per_socket", "threads_per_core", "arch", "os", "reason_time", "comment")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ALLOC_CPUS_FIELD_NUMBER: _ClassVar[int]
    ALLOC_MEM_MB_FIELD_NUMBER: _ClassVar[int]
    ALLOC_GPUS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_TIME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    SOCKETS_FIELD_NUMBER: _ClassVar[int]
    CORES_PER_SOCKET_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    REASON_TIME_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    address: str
    port: int
    cpus: int
    memory_mb: int
    gpus: _containers.RepeatedCompositeFieldContainer[GpuDevice]
    state: str
    reason: str
    alloc_cpus: int
    alloc_mem_mb: int
    alloc_gpus: int
    last_heartbeat: float
    registered_time: float
    partitions: _containers.RepeatedScalarFieldContainer[str]
    version: str
    boot_time: float
    features: _containers.RepeatedScalarFieldContainer[str]
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    arch: str
    os: str
    reason_time: float
    comment: str
    def __init__(self, name: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ..., cpus: _Optional[int] = ..., memory_mb: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[GpuDevice, _Mapping]]] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., alloc_cpus: _Optional[int] = ..., alloc_mem_mb: _Optional[int] = ..., alloc_gpus: _Optional[int] = ..., last_heartbeat: _Optional[float] = ..., registered_time: _Optional[float] = ..., partitions: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ..., boot_time: _Optional[float] = ..., features: _Optional[_Iterable[str]] = ..., sockets: _Optional[int] = ..., cores_per_socket: _Optional[int] = ..., threads_per_core: _Optional[int] = ..., arch: _Optional[str] = ..., os: _Optional[str] = ..., reason_time: _Optional[float] = ..., comment: _Optional[str] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("name", "state", "is_default", "nodes", "max_time_secs", "default_time_secs", "nodes_expr", "enforce_limits")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    NODES_EXPR_FIELD_NUMBER: _ClassVar[int]
    ENFORCE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: str
    is_default: bool
    nodes: _containers.RepeatedScalarFieldContainer[str]
    max_time_secs: int
    default_time_secs: int
    nodes_expr: str
    enforce_limits: str
    def __init__(self, name: _Optional[str] = ..., state: _Optional[str] = ..., is_default: _Optional[bool] = ..., nodes: _Optional[_Iterable[str]] = ..., max_time_secs: _Optional[int] = ..., default_time_secs: _Optional[int] = ..., nodes_expr: _Optional[str] = ..., enforce_limits: _Optional[str] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class GetJobsRequest(_message.Message):
    __slots__ = ("job_ids", "states", "users", "partitions", "include_finished")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    states: _containers.RepeatedScalarFieldContainer[str]
    users: _containers.RepeatedScalarFieldContainer[str]
    partitions: _containers.RepeatedScalarFieldContainer[str]
    include_finished: bool
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., states: _Optional[_Iterable[str]] = ..., users: _Optional[_Iterable[str]] = ..., partitions: _Optional[_Iterable[str]] = ..., include_finished: _Optional[bool] = ...) -> None: ...

class GetJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobInfo]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobInfo, _Mapping]]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "signal", "array_task_id", "batch_only", "full", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ONLY_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    array_task_id: int
    batch_only: bool
    full: bool
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ..., array_task_id: _Optional[int] = ..., batch_only: _Optional[bool] = ..., full: _Optional[bool] = ..., step_id: _Optional[int] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("job_id", "array_task_id", "time_limit_secs", "partition", "priority", "nice", "name", "comment", "action")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    array_task_id: int
    time_limit_secs: int
    partition: str
    priority: int
    nice: int
    name: str
    comment: str
    action: str
    def __init__(self, job_id: _Optional[int] = ..., array_task_id: _Optional[int] = ..., time_limit_secs: _Optional[int] = ..., partition: _Optional[str] = ..., priority: _Optional[int] = ..., nice: _Optional[int] = ..., name: _Optional[str] = ..., comment: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class UpdateJobResponse(_message.Message):
    __slots__ = ("job_ids",)
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CreateStepRequest(_message.Message):
    __slots__ = ("job_id", "spec")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    spec: StepSpec
    def __init__(self, job_id: _Optional[int] = ..., spec: _Optional[_Union[StepSpec, _Mapping]] = ...) -> None: ...

class CreateStepResponse(_message.Message):
    __slots__ = ("step", "job")
    STEP_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    step: StepInfo
    job: JobInfo
    def __init__(self, step: _Optional[_Union[StepInfo, _Mapping]] = ..., job: _Optional[_Union[JobInfo, _Mapping]] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...

class GetNodesRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class GetNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class GetPartitionsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPartitionsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class UpdateNodeRequest(_message.Message):
    __slots__ = ("nodes", "state", "reason")
    NODES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    nodes: str
    state: str
    reason: str
    def __init__(self, nodes: _Optional[str] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ("name", "address", "port", "cpus", "memory_mb", "gpus", "running_job_ids", "version", "boot_time", "sockets", "cores_per_socket", "threads_per_core", "arch", "os", "features", "comment", "join_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    SOCKETS_FIELD_NUMBER: _ClassVar[int]
    CORES_PER_SOCKET_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    address: str
    port: int
    cpus: int
    memory_mb: int
    gpus: _containers.RepeatedCompositeFieldContainer[GpuDevice]
    running_job_ids: _containers.RepeatedScalarFieldContainer[int]
    version: str
    boot_time: float
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    arch: str
    os: str
    features: _containers.RepeatedScalarFieldContainer[str]
    comment: str
    join_token: str
    def __init__(self, name: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ..., cpus: _Optional[int] = ..., memory_mb: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[GpuDevice, _Mapping]]] = ..., running_job_ids: _Optional[_Iterable[int]] = ..., version: _Optional[str] = ..., boot_time: _Optional[float] = ..., sockets: _Optional[int] = ..., cores_per_socket: _Optional[int] = ..., threads_per_core: _Optional[int] = ..., arch: _Optional[str] = ..., os: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., comment: _Optional[str] = ..., join_token: _Optional[str] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ("heartbeat_interval_secs", "cluster_name", "cluster_id", "node_credential")
    HEARTBEAT_INTERVAL_SECS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_secs: int
    cluster_name: str
    cluster_id: str
    node_credential: str
    def __init__(self, heartbeat_interval_secs: _Optional[int] = ..., cluster_name: _Optional[str] = ..., cluster_id: _Optional[str] = ..., node_credential: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "running_job_ids", "unreported_job_ids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    UNREPORTED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    running_job_ids: _containers.RepeatedScalarFieldContainer[int]
    unreported_job_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., running_job_ids: _Optional[_Iterable[int]] = ..., unreported_job_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("known", "heartbeat_interval_secs", "revocation_version")
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECS_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_VERSION_FIELD_NUMBER: _ClassVar[int]
    known: bool
    heartbeat_interval_secs: int
    revocation_version: int
    def __init__(self, known: _Optional[bool] = ..., heartbeat_interval_secs: _Optional[int] = ..., revocation_version: _Optional[int] = ...) -> None: ...

class JobStatusReport(_message.Message):
    __slots__ = ("job_id", "node", "exit_code", "signal", "timed_out", "cancelled", "end_time", "message", "launch_failed", "step_id", "cluster_id", "out_of_memory")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FAILED_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_MEMORY_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    node: str
    exit_code: int
    signal: int
    timed_out: bool
    cancelled: bool
    end_time: float
    message: str
    launch_failed: bool
    step_id: int
    cluster_id: str
    out_of_memory: bool
    def __init__(self, job_id: _Optional[int] = ..., node: _Optional[str] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., timed_out: _Optional[bool] = ..., cancelled: _Optional[bool] = ..., end_time: _Optional[float] = ..., message: _Optional[str] = ..., launch_failed: _Optional[bool] = ..., step_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., out_of_memory: _Optional[bool] = ...) -> None: ...

class ControllerInfo(_message.Message):
    __slots__ = ("node_id", "address", "role", "term", "commit_index", "applied_index", "healthy", "leader_address", "cluster_id", "cluster_name")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    address: str
    role: str
    term: int
    commit_index: int
    applied_index: int
    healthy: bool
    leader_address: str
    cluster_id: str
    cluster_name: str
    def __init__(self, node_id: _Optional[int] = ..., address: _Optional[str] = ..., role: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., healthy: _Optional[bool] = ..., leader_address: _Optional[str] = ..., cluster_id: _Optional[str] = ..., cluster_name: _Optional[str] = ...) -> None: ...

class GetControllersResponse(_message.Message):
    __slots__ = ("controllers",)
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    controllers: _containers.RepeatedCompositeFieldContainer[ControllerInfo]
    def __init__(self, controllers: _Optional[_Iterable[_Union[ControllerInfo, _Mapping]]] = ...) -> None: ...

class ReconfigureResponse(_message.Message):
    __slots__ = ("applied", "node_id", "not_applied", "received_by")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NOT_APPLIED_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_BY_FIELD_NUMBER: _ClassVar[int]
    applied: _containers.RepeatedScalarFieldContainer[str]
    node_id: int
    not_applied: _containers.RepeatedScalarFieldContainer[str]
    received_by: int
    def __init__(self, applied: _Optional[_Iterable[str]] = ..., node_id: _Optional[int] = ..., not_applied: _Optional[_Iterable[str]] = ..., received_by: _Optional[int] = ...) -> None: ...

class LaunchJobRequest(_message.Message):
    __slots__ = ("job", "node", "first_task", "batch", "fence_term", "cluster_id")
    JOB_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    FIRST_TASK_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    FENCE_TERM_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    job: JobInfo
    node: str
    first_task: int
    batch: bool
    fence_term: int
    cluster_id: str
    def __init__(self, job: _Optional[_Union[JobInfo, _Mapping]] = ..., node: _Optional[str] = ..., first_task: _Optional[int] = ..., batch: _Optional[bool] = ..., fence_term: _Optional[int] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class LaunchJobResponse(_message.Message):
    __slots__ = ("already_running",)
    ALREADY_RUNNING_FIELD_NUMBER: _ClassVar[int]
    already_running: bool
    def __init__(self, already_running: _Optional[bool] = ...) -> None: ...

class LaunchStepRequest(_message.Message):
    __slots__ = ("job", "step", "node", "first_task", "pmi_server", "pmi_token")
    JOB_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    FIRST_TASK_FIELD_NUMBER: _ClassVar[int]
    PMI_SERVER_FIELD_NUMBER: _ClassVar[int]
    PMI_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job: JobInfo
    step: StepInfo
    node: str
    first_task: int
    pmi_server: str
    pmi_token: str
    def __init__(self, job: _Optional[_Union[JobInfo, _Mapping]] = ..., step: _Optional[_Union[StepInfo, _Mapping]] = ..., node: _Optional[str] = ..., first_task: _Optional[int] = ..., pmi_server: _Optional[str] = ..., pmi_token: _Optional[str] = ...) -> None: ...

class SignalJobRequest(_message.Message):
    __slots__ = ("job_id", "signal", "grace_secs", "step_id", "batch_only", "action", "time_limit_secs", "full")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECS_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ONLY_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECS_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    grace_secs: float
    step_id: int
    batch_only: bool
    action: str
    time_limit_secs: int
    full: bool
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ..., grace_secs: _Optional[float] = ..., step_id: _Optional[int] = ..., batch_only: _Optional[bool] = ..., action: _Optional[str] = ..., time_limit_secs: _Optional[int] = ..., full: _Optional[bool] = ...) -> None: ...

class StreamOutputRequest(_message.Message):
    __slots__ = ("job_id", "follow", "step_id", "observer")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVER_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    follow: bool
    step_id: int
    observer: bool
    def __init__(self, job_id: _Optional[int] = ..., follow: _Optional[bool] = ..., step_id: _Optional[int] = ..., observer: _Optional[bool] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("stream", "data", "task", "exit_code", "signal")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    stream: str
    data: bytes
    task: int
    exit_code: int
    signal: int
    def __init__(self, stream: _Optional[str] = ..., data: _Optional[bytes] = ..., task: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ...) -> None: ...

class AgentJob(_message.Message):
    __slots__ = ("job_id", "pid", "start_time", "finished")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    pid: int
    start_time: float
    finished: bool
    def __init__(self, job_id: _Optional[int] = ..., pid: _Optional[int] = ..., start_time: _Optional[float] = ..., finished: _Optional[bool] = ...) -> None: ...

class AgentStatus(_message.Message):
    __slots__ = ("name", "jobs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    name: str
    jobs: _containers.RepeatedCompositeFieldContainer[AgentJob]
    def __init__(self, name: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[AgentJob, _Mapping]]] = ...) -> None: ...
