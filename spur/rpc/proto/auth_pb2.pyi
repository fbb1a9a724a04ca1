from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MintTokenRequest(_message.Message):
    __slots__ = ("username", "lifespan_secs", "admin")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    LIFESPAN_SECS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    username: str
    lifespan_secs: int
    admin: bool
    def __init__(self, username: _Optional[str] = ..., lifespan_secs: _Optional[int] = ..., admin: _Optional[bool] = ...) -> None: ...

class MintTokenResponse(_message.Message):
    __slots__ = ("token", "username", "uid", "expires_at", "token_id")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    token: str
    username: str
    uid: int
    expires_at: int
    token_id: str
    def __init__(self, token: _Optional[str] = ..., username: _Optional[str] = ..., uid: _Optional[int] = ..., expires_at: _Optional[int] = ..., token_id: _Optional[str] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("token_id", "token")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    token: str
    def __init__(self, token_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class RevokeTokenResponse(_message.Message):
    __slots__ = ("token_id", "expires_at")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    expires_at: int
    def __init__(self, token_id: _Optional[str] = ..., expires_at: _Optional[int] = ...) -> None: ...

class ListRevokedRequest(_message.Message):
    __slots__ = ("since_version",)
    SINCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    since_version: int
    def __init__(self, since_version: _Optional[int] = ...) -> None: ...

class RevokedToken(_message.Message):
    __slots__ = ("token_id", "expires_at")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    expires_at: float
    def __init__(self, token_id: _Optional[str] = ..., expires_at: _Optional[float] = ...) -> None: ...

class ListRevokedResponse(_message.Message):
    __slots__ = ("version", "changed", "tokens")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    version: int
    changed: bool
    tokens: _containers.RepeatedCompositeFieldContainer[RevokedToken]
    def __init__(self, version: _Optional[int] = ..., changed: _Optional[bool] = ..., tokens: _Optional[_Iterable[_Union[RevokedToken, _Mapping]]] = ...) -> None: ...
