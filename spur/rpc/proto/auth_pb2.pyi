from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

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
    __slots__ = ("token", "username", "uid", "expires_at")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    token: str
    username: str
    uid: int
    expires_at: int
    def __init__(self, token: _Optional[str] = ..., username: _Optional[str] = ..., uid: _Optional[int] = ..., expires_at: _Optional[int] = ...) -> None: ...
