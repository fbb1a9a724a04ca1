"""A pure-Python protobuf codec for the few messages the hot CLI commands exchange.

Loading protobuf (the upb extension, ``spur_pb2``'s descriptors and message classes) costs a fresh
process about 20 ms, as much as the whole rest of ``squeue`` or ``scontrol show job``; decoding a
600-job ``GetJobsResponse`` in pure Python costs a few. So ``sbatch``, ``squeue`` and ``scontrol show
job`` speak the wire format with this module instead, for exactly the messages listed in
:mod:`spur.rpc.lite_schema` (generated from ``spur_pb2``'s descriptors; a test keeps it current and
checks that both codecs agree byte for byte and field for field).

Message classes (``lite.GetJobsRequest``, ``lite.JobInfo``...) behave like protobuf's for what the CLI
uses: keyword construction, attribute reads with proto3 defaults (``""``, ``0``, ``False``, an empty
sequence or mapping, an empty sub-message), ``HasField`` for fields with presence,
``SerializeToString`` and ``FromString``. Decoded repeated fields are lists; unset ones read as an
empty tuple. Unknown fields are skipped, as protobuf does. Errors in the input raise
:class:`DecodeError`. Pure: no I/O.
"""

from __future__ import annotations

from struct import Struct
from struct import error as StructError

from spur.rpc.lite_schema import MESSAGES, METHODS, SERVICE
from spur.rpc.protowire import put_varint, varint

TYPE_CHECKING = False  # typing itself is not imported at run time (a CLI start-up cost)
if TYPE_CHECKING:
    from google.protobuf.message import Message as ProtobufMessage

    from spur.core.job import JobSpec

__all__ = [
    "PROTOBUF_ABOVE",
    "SERVICE",
    "SERVICE_DESCRIPTOR",
    "METHODS",
    "Adaptive",
    "DecodeError",
    "Message",
    "message_class",
    "spec_request",
]

_DOUBLE = Struct("<d")
_FLOAT = Struct("<f")
_U32 = Struct("<I")
_U64 = Struct("<Q")
_I32 = Struct("<i")
_I64 = Struct("<q")

# Kinds: how a field's value is read from / written to the wire.
(K_UINT, K_INT, K_SINT, K_BOOL, K_STR, K_BYTES, K_MSG, K_F64, K_F32, K_FIX32, K_FIX64, K_SFIX32, K_SFIX64) = (
    range(13)
)
_KIND = {
    "uint32": K_UINT, "uint64": K_UINT, "int32": K_INT, "int64": K_INT, "enum": K_INT,
    "sint32": K_SINT, "sint64": K_SINT, "bool": K_BOOL, "string": K_STR, "bytes": K_BYTES,
    "message": K_MSG, "double": K_F64, "float": K_F32, "fixed32": K_FIX32, "fixed64": K_FIX64,
    "sfixed32": K_SFIX32, "sfixed64": K_SFIX64,
}  # fmt: skip
# Wire type of each kind; fixed-width kinds map to their struct.
_WIRE = {K_F64: 1, K_FIX64: 1, K_SFIX64: 1, K_F32: 5, K_FIX32: 5, K_SFIX32: 5, K_STR: 2, K_BYTES: 2, K_MSG: 2}
_FIXED = {K_F64: _DOUBLE, K_F32: _FLOAT, K_FIX32: _U32, K_FIX64: _U64, K_SFIX32: _I32, K_SFIX64: _I64}
SINGULAR, OPTIONAL, REPEATED, MAP = 0, 1, 2, 3
_LABEL = {"singular": SINGULAR, "optional": OPTIONAL, "repeated": REPEATED, "map": MAP}


class DecodeError(ValueError):
    """The bytes are not a valid encoding of the message."""


class _Descriptor:
    """The part of protobuf's descriptor that callers read: ``full_name``."""

    def __init__(self, full_name: str) -> None:
        self.full_name = full_name


class _Field:
    __slots__ = ("number", "name", "kind", "label", "cls", "tag", "wire")

    def __init__(self, number: int, name: str, kind: int, label: int) -> None:
        self.number, self.name, self.kind, self.label = number, name, kind, label
        self.cls: type[Message] | None = None  # sub-message class (map: the entry class)
        self.wire = _WIRE.get(kind, 0)
        packed = label == REPEATED and kind not in (K_STR, K_BYTES, K_MSG)
        self.tag = varint((number << 3) | (2 if packed else self.wire))


class Message:
    """Base of the generated lite message classes; see the module docstring."""

    DESCRIPTOR: _Descriptor
    _fields: tuple[_Field, ...] = ()
    _by_name: dict[str, _Field] = {}
    _by_key: dict[int, _Entry] = {}
    DecodeError = DecodeError

    def __init__(self, **values: object) -> None:
        by_name = self._by_name
        for name, value in values.items():
            f = by_name.get(name)
            if f is None:
                raise ValueError(f"Protocol message {self.DESCRIPTOR.full_name} has no {name!r} field.")
            if value is None:
                continue
            if f.label == REPEATED:
                value = list(value)  # type: ignore[call-overload]
            elif f.label == MAP:
                value = dict(value)  # type: ignore[call-overload]
            self.__dict__[name] = value

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        f = self._by_name.get(name)
        if f is None or not (f.label == OPTIONAL or (f.label == SINGULAR and f.kind == K_MSG)):
            raise ValueError(f"{self.DESCRIPTOR.full_name} has no presence field {name!r}")
        return name in self.__dict__

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.SerializeToString() == other.SerializeToString()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({shown})"

    # ------------------------------------------------------------------ encoding

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        out = bytearray()
        self._encode(out)
        return bytes(out)

    def _encode(self, out: bytearray) -> None:
        values = self.__dict__
        for f in self._fields:
            value = values.get(f.name)
            if value is None:
                continue
            label = f.label
            if label == SINGULAR:
                if f.kind == K_MSG:
                    _put_bytes(out, f.tag, value.SerializeToString())
                elif value:
                    _put_scalar(out, f, value)
            elif label == OPTIONAL:
                _put_scalar(out, f, value)
            elif label == REPEATED:
                if not value:
                    continue
                if f.kind == K_MSG:
                    for item in value:
                        _put_bytes(out, f.tag, item.SerializeToString())
                elif f.kind in (K_STR, K_BYTES):
                    for item in value:
                        _put_scalar(out, f, item)
                else:  # proto3 packs repeated numbers
                    packed = bytearray()
                    for item in value:
                        _put_value(packed, f.kind, item)
                    _put_bytes(out, f.tag, bytes(packed))
            else:  # map: one entry message per key
                entry = f.cls
                assert entry is not None
                for k, v in value.items():
                    _put_bytes(out, f.tag, entry(key=k, value=v).SerializeToString())

    # ------------------------------------------------------------------ decoding

    @classmethod
    def FromString(cls, data: bytes) -> Message:  # noqa: N802 - protobuf's name
        try:
            return _decode(cls, data, 0, len(data))
        except (IndexError, UnicodeDecodeError, ValueError, StructError) as exc:
            if isinstance(exc, DecodeError):
                raise
            raise DecodeError(f"error parsing {cls.DESCRIPTOR.full_name}: {exc}") from None


def _put_value(out: bytearray, kind: int, value: str | bytes | int | float) -> None:
    """Write a number of ``kind``; TypeError for a zigzag-encoded value that is not an int."""
    if kind in (K_UINT, K_INT, K_BOOL):
        put_varint(out, int(value))
    elif kind == K_SINT:
        if not isinstance(value, int):
            raise _wrong_type(value)
        put_varint(out, (value << 1) ^ (value >> 63))
    else:
        out += _FIXED[kind].pack(value)


def _wrong_type(value: object) -> TypeError:
    """What protobuf raises for a value of the wrong type."""
    return TypeError(f"{value!r} has type {type(value).__name__}, which the field does not take")


def _put_bytes(out: bytearray, tag: bytes, data: bytes) -> None:
    out += tag
    put_varint(out, len(data))
    out += data


def _put_scalar(out: bytearray, f: _Field, value: str | bytes | int | float) -> None:
    if f.kind == K_STR:
        if not isinstance(value, str):
            raise _wrong_type(value)
        _put_bytes(out, f.tag, value.encode())
    elif f.kind == K_BYTES:
        if isinstance(value, (str, int, float)):
            raise _wrong_type(value)
        _put_bytes(out, f.tag, bytes(value))
    else:
        out += f.tag
        _put_value(out, f.kind, value)


# Decoding actions, per (field number, wire type) key: see _keys.
(A_UINT, A_INT, A_SINT, A_BOOL, A_STR, A_BYTES, A_MSG, A_MAP, A_FIXED, A_PACKED) = range(10)


if TYPE_CHECKING:
    # What _decode does with a key: (name, action, repeated, message class, struct, kind). The class
    # is A_MSG's sub-message or A_MAP's entry, the struct A_FIXED's, the kind A_PACKED's; a slot its
    # action does not read holds a placeholder of the slot's type (typed slots, not a union that
    # the hot loop would narrow field by field).
    _Entry = tuple[str, int, bool, type[Message], Struct, int]


def _keys(fields: tuple[_Field, ...]) -> dict[int, _Entry]:
    """``(number << 3 | wire type)`` -> :data:`_Entry`: what :func:`_decode` does with that key.
    Repeated numbers are accepted packed and unpacked, as protobuf does; a key with any other wire
    type is an unknown field (skipped)."""
    actions = {K_UINT: A_UINT, K_INT: A_INT, K_SINT: A_SINT, K_BOOL: A_BOOL, K_STR: A_STR, K_BYTES: A_BYTES}
    out: dict[int, _Entry] = {}
    for f in fields:
        rep = f.label == REPEATED
        if f.kind == K_MSG:
            if f.cls is None:
                raise KeyError(f"message field {f.name!r} names no message type in the tables")
            out[f.number << 3 | 2] = (f.name, A_MAP if f.label == MAP else A_MSG, rep, f.cls, _DOUBLE, f.kind)
        elif f.kind in _FIXED:
            out[f.number << 3 | f.wire] = (f.name, A_FIXED, rep, Message, _FIXED[f.kind], f.kind)
        else:
            out[f.number << 3 | f.wire] = (f.name, actions[f.kind], rep, Message, _DOUBLE, f.kind)
        if rep and f.kind not in (K_STR, K_BYTES, K_MSG):
            out[f.number << 3 | 2] = (f.name, A_PACKED, rep, Message, _DOUBLE, f.kind)
    return out


def _decode(cls: type[Message], buf: bytes, pos: int, end: int) -> Message:  # noqa: C901 - one tight loop
    """Decode ``buf[pos:end]`` as ``cls``. The hot loop of a ``squeue``: kept flat on purpose."""
    keys = cls._by_key
    d: dict[str, object] = {}
    # The repeated fields' lists and the maps' dicts, also in ``d`` (inserted at first sight, as
    # field order there is the order read).
    lists: dict[str, list[object]] = {}
    maps: dict[str, dict[object, object]] = {}
    v: object  # each branch below narrows it by assignment
    while pos < end:
        key = buf[pos]
        pos += 1
        if key & 0x80:
            key &= 0x7F
            shift = 7
            while True:
                b = buf[pos]
                pos += 1
                key |= (b & 0x7F) << shift
                if not b & 0x80:
                    break
                shift += 7
        f = keys.get(key)
        if f is None:
            pos = _skip(buf, pos, key & 7)
            continue
        name, action, rep, sub, st, kind = f
        if action <= A_BOOL:  # a varint
            v = buf[pos]
            pos += 1
            if v & 0x80:
                v &= 0x7F
                shift = 7
                while True:
                    b = buf[pos]
                    pos += 1
                    v |= (b & 0x7F) << shift
                    if not b & 0x80:
                        break
                    shift += 7
            if action == A_INT:
                if v >= 1 << 63:
                    v -= 1 << 64
            elif action == A_BOOL:
                v = bool(v)
            elif action == A_SINT:
                v = (v >> 1) ^ -(v & 1)
        elif action == A_FIXED:
            v = st.unpack_from(buf, pos)[0]
            pos += st.size
        else:  # length-delimited
            n = buf[pos]
            pos += 1
            if n & 0x80:
                n &= 0x7F
                shift = 7
                while True:
                    b = buf[pos]
                    pos += 1
                    n |= (b & 0x7F) << shift
                    if not b & 0x80:
                        break
                    shift += 7
            start = pos
            pos += n
            if pos > end:
                raise DecodeError("truncated length-delimited field")
            if action == A_STR:
                v = buf[start:pos].decode()
            elif action == A_MSG:
                v = _decode(sub, buf, start, pos)
            elif action == A_MAP:
                entry = _decode(sub, buf, start, pos).__dict__
                mapping = maps.get(name)
                if mapping is None:
                    mapping = maps[name] = {}
                    d[name] = mapping
                # An item the entry leaves out reads as the entry class's default (set by _build).
                defaults = sub.__dict__
                mapping[entry.get("key", defaults["key"])] = entry.get("value", defaults["value"])
                continue
            elif action == A_BYTES:
                v = bytes(buf[start:pos])
            else:  # packed numbers
                items = lists.get(name)
                if items is None:
                    items = lists[name] = []
                    d[name] = items
                items.extend(_unpack(kind, buf, start, pos))
                continue
        if rep:
            items = lists.get(name)
            if items is None:
                items = lists[name] = []
                d[name] = items
            items.append(v)
        else:
            d[name] = v
    if pos != end:
        raise DecodeError("truncated message")
    msg = cls.__new__(cls)
    msg.__dict__ = d
    return msg


def _skip(buf: bytes, pos: int, wire: int) -> int:
    """The position after an unknown field's value of ``wire`` type starting at ``pos``."""
    if wire == 0:
        while buf[pos] & 0x80:
            pos += 1
        return pos + 1
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        n = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return pos + n
            shift += 7
    raise DecodeError(f"unsupported wire type {wire}")


def _unpack(kind: int, buf: bytes, pos: int, end: int) -> list[int | float]:
    out: list[int | float] = []
    if kind in _FIXED:
        st = _FIXED[kind]
        while pos < end:
            out.append(st.unpack_from(buf, pos)[0])
            pos += st.size
        return out
    while pos < end:
        v = 0
        shift = 0
        while True:
            b = buf[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        if kind == K_INT and v >= 1 << 63:
            v -= 1 << 64
        elif kind == K_SINT:
            v = (v >> 1) ^ -(v & 1)
        elif kind == K_BOOL:
            v = bool(v)
        out.append(v)
    if pos != end:
        raise DecodeError("truncated packed field")
    return out


_ZERO = {
    K_UINT: 0, K_INT: 0, K_SINT: 0, K_BOOL: False, K_STR: "", K_BYTES: b"", K_F64: 0.0, K_F32: 0.0,
    K_FIX32: 0, K_FIX64: 0, K_SFIX32: 0, K_SFIX64: 0,
}  # fmt: skip


_CLASSES: dict[str, type[Message]] = {}


def _build(full_name: str) -> type[Message]:
    """Create the class of ``full_name`` and, first, of the messages it contains (on first use only:
    ``sbatch`` never builds the job listing's classes). KeyError for a message not in the tables."""
    from types import MappingProxyType

    rows = MESSAGES[full_name]
    fields = tuple(_Field(num, name, _KIND[typ], _LABEL[label]) for num, name, typ, label, _sub in rows)
    attrs: dict[str, object] = {
        "DESCRIPTOR": _Descriptor(full_name),
        "_fields": fields,
        "_by_name": {f.name: f for f in fields},
        "__module__": __name__,
        "__qualname__": full_name.rsplit(".", 1)[1],
    }
    for f in fields:
        if f.label == REPEATED:
            attrs[f.name] = ()
        elif f.label == MAP:
            attrs[f.name] = MappingProxyType({})
        elif f.kind != K_MSG:
            attrs[f.name] = _ZERO[f.kind]
    cls: type[Message] = type(full_name.rsplit(".", 1)[1], (Message,), attrs)
    _CLASSES[full_name] = cls
    for f, (_n, _name, _t, _label, sub) in zip(fields, rows, strict=True):
        if sub:
            f.cls = _CLASSES.get(sub) or _build(sub)  # registered before recursing: cycles are fine
            if f.label == SINGULAR:
                setattr(cls, f.name, f.cls())  # an unset sub-message reads as an empty one
    cls._by_key = _keys(fields)
    return cls


SERVICE_DESCRIPTOR = _Descriptor(SERVICE)


def spec_request(spec: JobSpec) -> Message:
    """``SubmitJobRequest(spec=...)`` for a :class:`spur.core.job.JobSpec`, as
    :func:`spur.rpc.convert.spec_to_proto` builds it (its fields mirror the message's; only set
    values are passed)."""
    names = type(spec).__dataclass_fields__
    values = {name: value for name in names if (value := getattr(spec, name))}
    return message_class("spur.v1.SubmitJobRequest")(spec=message_class("spur.v1.JobSpec")(**values))


# Above this many bytes protobuf (upb, in C) decodes a response faster than this module does, its
# ~20 ms import included: about 2,000 jobs of a GetJobsResponse (decode + render of a listing,
# measured: lite ahead at 1,000 jobs, protobuf at 2,500).
PROTOBUF_ABOVE = 256 * 1024


class Adaptive:
    """A response type for :class:`spur.rpc.blocking.BlockingChannel` whose ``FromString`` decodes
    with this module up to :data:`PROTOBUF_ABOVE` bytes and with protobuf beyond (then returning
    the ``spur_pb2`` message, which reads the same). Errors are :class:`DecodeError` either way."""

    DecodeError = DecodeError

    def __init__(self, full_name: str) -> None:
        self.full_name = full_name
        self.DESCRIPTOR = _Descriptor(full_name)

    def FromString(self, data: bytes) -> Message | ProtobufMessage:  # noqa: N802 - protobuf's name
        if len(data) <= PROTOBUF_ABOVE:
            return message_class(self.full_name).FromString(data)
        from spur.rpc.proto import spur_pb2  # spur.rpc.proto first: it defers protobuf's unused runtime

        try:
            decoded: ProtobufMessage = getattr(spur_pb2, self.full_name.rsplit(".", 1)[1]).FromString(data)
            return decoded
        except Exception as exc:
            from google.protobuf.message import DecodeError as ProtobufDecodeError

            if isinstance(exc, ProtobufDecodeError):
                raise DecodeError(f"error parsing {self.full_name}: {exc}") from None
            raise


def message_class(full_name: str) -> type[Message]:
    """The lite class of a message in :mod:`spur.rpc.lite_schema` (KeyError for any other)."""
    return _CLASSES.get(full_name) or _build(full_name)


def __getattr__(name: str) -> type[Message]:
    """``lite.JobInfo`` and the like: the class of ``spur.v1.<name>``."""
    try:
        return message_class(f"spur.v1.{name}")
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
