from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class K8sUpRequest(_message.Message):
    __slots__ = ("nodes", "partition", "selectors", "control_plane_nodes", "replicas")
    NODES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_NODES_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    nodes: str
    partition: str
    selectors: _containers.RepeatedScalarFieldContainer[str]
    control_plane_nodes: _containers.RepeatedScalarFieldContainer[str]
    replicas: int
    def __init__(self, nodes: _Optional[str] = ..., partition: _Optional[str] = ..., selectors: _Optional[_Iterable[str]] = ..., control_plane_nodes: _Optional[_Iterable[str]] = ..., replicas: _Optional[int] = ...) -> None: ...

class K8sNodeInfo(_message.Message):
    __slots__ = ("name", "role", "component_state", "enabled", "reason", "pod_cidr", "mesh_ip", "start_in_flight_since", "start_failures", "start_failure", "start_retry_at", "drift")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_STATE_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    MESH_IP_FIELD_NUMBER: _ClassVar[int]
    START_IN_FLIGHT_SINCE_FIELD_NUMBER: _ClassVar[int]
    START_FAILURES_FIELD_NUMBER: _ClassVar[int]
    START_FAILURE_FIELD_NUMBER: _ClassVar[int]
    START_RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    component_state: str
    enabled: bool
    reason: str
    pod_cidr: str
    mesh_ip: str
    start_in_flight_since: float
    start_failures: int
    start_failure: str
    start_retry_at: float
    drift: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., component_state: _Optional[str] = ..., enabled: _Optional[bool] = ..., reason: _Optional[str] = ..., pod_cidr: _Optional[str] = ..., mesh_ip: _Optional[str] = ..., start_in_flight_since: _Optional[float] = ..., start_failures: _Optional[int] = ..., start_failure: _Optional[str] = ..., start_retry_at: _Optional[float] = ..., drift: _Optional[str] = ...) -> None: ...

class K8sStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class K8sClusterStatus(_message.Message):
    __slots__ = ("phase", "control_planes", "scoped", "nodes", "phase_since", "reset", "message", "outside")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANES_FIELD_NUMBER: _ClassVar[int]
    SCOPED_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PHASE_SINCE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_FIELD_NUMBER: _ClassVar[int]
    phase: str
    control_planes: _containers.RepeatedScalarFieldContainer[str]
    scoped: bool
    nodes: _containers.RepeatedCompositeFieldContainer[K8sNodeInfo]
    phase_since: float
    reset: bool
    message: str
    outside: _containers.RepeatedCompositeFieldContainer[K8sNodeInfo]
    def __init__(self, phase: _Optional[str] = ..., control_planes: _Optional[_Iterable[str]] = ..., scoped: _Optional[bool] = ..., nodes: _Optional[_Iterable[_Union[K8sNodeInfo, _Mapping]]] = ..., phase_since: _Optional[float] = ..., reset: _Optional[bool] = ..., message: _Optional[str] = ..., outside: _Optional[_Iterable[_Union[K8sNodeInfo, _Mapping]]] = ...) -> None: ...

class K8sDownRequest(_message.Message):
    __slots__ = ("reset",)
    RESET_FIELD_NUMBER: _ClassVar[int]
    reset: bool
    def __init__(self, reset: _Optional[bool] = ...) -> None: ...

class K8sNodesRequest(_message.Message):
    __slots__ = ("nodes", "partition", "selectors", "drain_timeout_secs", "force")
    NODES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_TIMEOUT_SECS_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    nodes: str
    partition: str
    selectors: _containers.RepeatedScalarFieldContainer[str]
    drain_timeout_secs: float
    force: bool
    def __init__(self, nodes: _Optional[str] = ..., partition: _Optional[str] = ..., selectors: _Optional[_Iterable[str]] = ..., drain_timeout_secs: _Optional[float] = ..., force: _Optional[bool] = ...) -> None: ...

class K8sNodesResponse(_message.Message):
    __slots__ = ("nodes", "message")
    NODES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedScalarFieldContainer[str]
    message: str
    def __init__(self, nodes: _Optional[_Iterable[str]] = ..., message: _Optional[str] = ...) -> None: ...

class K8sKubeconfigRequest(_message.Message):
    __slots__ = ("user", "admin")
    USER_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    user: str
    admin: bool
    def __init__(self, user: _Optional[str] = ..., admin: _Optional[bool] = ...) -> None: ...

class K8sKubeconfigResponse(_message.Message):
    __slots__ = ("kubeconfig",)
    KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    kubeconfig: str
    def __init__(self, kubeconfig: _Optional[str] = ...) -> None: ...
