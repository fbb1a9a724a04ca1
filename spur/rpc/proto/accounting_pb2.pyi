from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcctChangeRequest(_message.Message):
    __slots__ = ("op", "entity", "names", "where", "values")
    class WhereEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    OP_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    op: str
    entity: str
    names: _containers.RepeatedScalarFieldContainer[str]
    where: _containers.ScalarMap[str, str]
    values: _containers.ScalarMap[str, str]
    def __init__(self, op: _Optional[str] = ..., entity: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., where: _Optional[_Mapping[str, str]] = ..., values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AcctChangeResponse(_message.Message):
    __slots__ = ("lines",)
    LINES_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lines: _Optional[_Iterable[str]] = ...) -> None: ...

class AcctShowRequest(_message.Message):
    __slots__ = ("entity", "with_assoc")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    WITH_ASSOC_FIELD_NUMBER: _ClassVar[int]
    entity: str
    with_assoc: bool
    def __init__(self, entity: _Optional[str] = ..., with_assoc: _Optional[bool] = ...) -> None: ...

class AcctRecord(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.ScalarMap[str, str]
    def __init__(self, fields: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AcctRecords(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AcctRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[AcctRecord, _Mapping]]] = ...) -> None: ...

class SharesRequest(_message.Message):
    __slots__ = ("accounts", "users", "all_users")
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ALL_USERS_FIELD_NUMBER: _ClassVar[int]
    accounts: _containers.RepeatedScalarFieldContainer[str]
    users: _containers.RepeatedScalarFieldContainer[str]
    all_users: bool
    def __init__(self, accounts: _Optional[_Iterable[str]] = ..., users: _Optional[_Iterable[str]] = ..., all_users: _Optional[bool] = ...) -> None: ...

class PrioritiesRequest(_message.Message):
    __slots__ = ("job_ids", "users")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_ids: _Optional[_Iterable[int]] = ..., users: _Optional[_Iterable[str]] = ...) -> None: ...
