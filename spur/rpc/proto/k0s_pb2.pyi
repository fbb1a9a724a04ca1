from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class K0sApplyRequest(_message.Message):
    __slots__ = ("role", "control_plane_count", "pod_cidr", "service_cidr", "advertise_address", "control_plane_addresses", "join_token")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_COUNT_FIELD_NUMBER: _ClassVar[int]
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CIDR_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    role: str
    control_plane_count: int
    pod_cidr: str
    service_cidr: str
    advertise_address: str
    control_plane_addresses: _containers.RepeatedScalarFieldContainer[str]
    join_token: str
    def __init__(self, role: _Optional[str] = ..., control_plane_count: _Optional[int] = ..., pod_cidr: _Optional[str] = ..., service_cidr: _Optional[str] = ..., advertise_address: _Optional[str] = ..., control_plane_addresses: _Optional[_Iterable[str]] = ..., join_token: _Optional[str] = ...) -> None: ...

class K0sStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class K0sStatus(_message.Message):
    __slots__ = ("installed", "unit_present", "spur_owned", "active_state", "enabled", "role", "component_state", "main_pid", "detail", "running", "running_role", "claimed", "running_unit")
    INSTALLED_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRESENT_FIELD_NUMBER: _ClassVar[int]
    SPUR_OWNED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_STATE_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_STATE_FIELD_NUMBER: _ClassVar[int]
    MAIN_PID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_ROLE_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_UNIT_FIELD_NUMBER: _ClassVar[int]
    installed: bool
    unit_present: bool
    spur_owned: bool
    active_state: str
    enabled: bool
    role: str
    component_state: str
    main_pid: int
    detail: str
    running: bool
    running_role: str
    claimed: bool
    running_unit: str
    def __init__(self, installed: _Optional[bool] = ..., unit_present: _Optional[bool] = ..., spur_owned: _Optional[bool] = ..., active_state: _Optional[str] = ..., enabled: _Optional[bool] = ..., role: _Optional[str] = ..., component_state: _Optional[str] = ..., main_pid: _Optional[int] = ..., detail: _Optional[str] = ..., running: _Optional[bool] = ..., running_role: _Optional[str] = ..., claimed: _Optional[bool] = ..., running_unit: _Optional[str] = ...) -> None: ...

class K0sStopRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class K0sResetRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class K0sTokenRequest(_message.Message):
    __slots__ = ("role",)
    ROLE_FIELD_NUMBER: _ClassVar[int]
    role: str
    def __init__(self, role: _Optional[str] = ...) -> None: ...

class K0sTokenResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class K0sKubeconfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class K0sKubeconfigResponse(_message.Message):
    __slots__ = ("kubeconfig",)
    KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    kubeconfig: str
    def __init__(self, kubeconfig: _Optional[str] = ...) -> None: ...
