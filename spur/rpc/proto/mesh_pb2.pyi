from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Member(_message.Message):
    __slots__ = ("node", "public_key", "endpoint", "address", "pod_cidr")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    node: str
    public_key: str
    endpoint: str
    address: str
    pod_cidr: str
    def __init__(self, node: _Optional[str] = ..., public_key: _Optional[str] = ..., endpoint: _Optional[str] = ..., address: _Optional[str] = ..., pod_cidr: _Optional[str] = ...) -> None: ...

class MemberSet(_message.Message):
    __slots__ = ("node", "address", "cidr", "listen_port", "members", "version")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CIDR_FIELD_NUMBER: _ClassVar[int]
    LISTEN_PORT_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node: str
    address: str
    cidr: str
    listen_port: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    version: int
    def __init__(self, node: _Optional[str] = ..., address: _Optional[str] = ..., cidr: _Optional[str] = ..., listen_port: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class MemberDelta(_message.Message):
    __slots__ = ("base_version", "version", "cidr", "listen_port", "upsert", "removed")
    BASE_VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CIDR_FIELD_NUMBER: _ClassVar[int]
    LISTEN_PORT_FIELD_NUMBER: _ClassVar[int]
    UPSERT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    base_version: int
    version: int
    cidr: str
    listen_port: int
    upsert: _containers.RepeatedCompositeFieldContainer[Member]
    removed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, base_version: _Optional[int] = ..., version: _Optional[int] = ..., cidr: _Optional[str] = ..., listen_port: _Optional[int] = ..., upsert: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., removed: _Optional[_Iterable[str]] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("node", "public_key", "endpoint")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    node: str
    public_key: str
    endpoint: str
    def __init__(self, node: _Optional[str] = ..., public_key: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...

class LeaveRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class LeaveResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class MembersRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class SetPodCidrRequest(_message.Message):
    __slots__ = ("node", "pod_cidr")
    NODE_FIELD_NUMBER: _ClassVar[int]
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    node: str
    pod_cidr: str
    def __init__(self, node: _Optional[str] = ..., pod_cidr: _Optional[str] = ...) -> None: ...

class NetEmpty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("node", "public_key", "endpoint", "allowed_ips", "last_handshake", "rx_bytes", "tx_bytes")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_IPS_FIELD_NUMBER: _ClassVar[int]
    LAST_HANDSHAKE_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    node: str
    public_key: str
    endpoint: str
    allowed_ips: _containers.RepeatedScalarFieldContainer[str]
    last_handshake: float
    rx_bytes: int
    tx_bytes: int
    def __init__(self, node: _Optional[str] = ..., public_key: _Optional[str] = ..., endpoint: _Optional[str] = ..., allowed_ips: _Optional[_Iterable[str]] = ..., last_handshake: _Optional[float] = ..., rx_bytes: _Optional[int] = ..., tx_bytes: _Optional[int] = ...) -> None: ...

class NetStatus(_message.Message):
    __slots__ = ("joined", "interface", "backend", "interface_up", "address", "public_key", "endpoint", "listen_port", "peers", "disagreements")
    JOINED_FIELD_NUMBER: _ClassVar[int]
    INTERFACE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    INTERFACE_UP_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LISTEN_PORT_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    DISAGREEMENTS_FIELD_NUMBER: _ClassVar[int]
    joined: bool
    interface: str
    backend: str
    interface_up: bool
    address: str
    public_key: str
    endpoint: str
    listen_port: int
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    disagreements: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, joined: _Optional[bool] = ..., interface: _Optional[str] = ..., backend: _Optional[str] = ..., interface_up: _Optional[bool] = ..., address: _Optional[str] = ..., public_key: _Optional[str] = ..., endpoint: _Optional[str] = ..., listen_port: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., disagreements: _Optional[_Iterable[str]] = ...) -> None: ...

class ApplyResult(_message.Message):
    __slots__ = ("added", "updated", "removed", "recreated", "need_whole_set")
    ADDED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    RECREATED_FIELD_NUMBER: _ClassVar[int]
    NEED_WHOLE_SET_FIELD_NUMBER: _ClassVar[int]
    added: int
    updated: int
    removed: int
    recreated: bool
    need_whole_set: bool
    def __init__(self, added: _Optional[int] = ..., updated: _Optional[int] = ..., removed: _Optional[int] = ..., recreated: _Optional[bool] = ..., need_whole_set: _Optional[bool] = ...) -> None: ...
