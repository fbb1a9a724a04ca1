from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EffectiveConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConfigRow(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class EffectiveConfig(_message.Message):
    __slots__ = ("node_id", "role", "config_file", "loaded_at", "rows")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FILE_FIELD_NUMBER: _ClassVar[int]
    LOADED_AT_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    role: str
    config_file: str
    loaded_at: float
    rows: _containers.RepeatedCompositeFieldContainer[ConfigRow]
    def __init__(self, node_id: _Optional[int] = ..., role: _Optional[str] = ..., config_file: _Optional[str] = ..., loaded_at: _Optional[float] = ..., rows: _Optional[_Iterable[_Union[ConfigRow, _Mapping]]] = ...) -> None: ...
