"""Byte formats of the Raft storage files. Pure functions: no I/O.

WAL record: ``[u32 length][u32 crc32(payload)][payload]`` with payload ``[u64 index][u64 term][data]``,
all little-endian. A segment file is a plain concatenation of records.

Hard state and snapshot files carry a magic, a version and a CRC over everything after the CRC field, so a
damaged file is reported instead of silently misread.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import Enum

RECORD_HEADER = struct.Struct("<II")
ENTRY_HEADER = struct.Struct("<QQ")
MIN_PAYLOAD = ENTRY_HEADER.size
#: Upper bound on one record's payload; larger entries are refused at append time, so a larger length
#: field on disk can only be damage.
MAX_PAYLOAD = 256 * 1024 * 1024
#: Torn-write detection granularity (a crash can leave whole disk sectors zero-filled).
SECTOR = 512


class DecodeError(ValueError):
    """A hard state or snapshot file does not decode; the message says why."""


def encode_record(index: int, term: int, data: bytes) -> bytes:
    """Return the WAL record bytes for one entry."""
    payload = ENTRY_HEADER.pack(index, term) + data
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"log entry {index} is {len(data)} bytes; the limit is {MAX_PAYLOAD - MIN_PAYLOAD}")
    return RECORD_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class TailKind(Enum):
    """How a scan of a segment's bytes ended."""

    CLEAN = "clean"  # every byte belongs to a valid record
    TORN = "torn"  # the bytes from `end` on look like an interrupted write (incomplete or zero-filled)
    CORRUPT = "corrupt"  # a complete record at `end` fails its checksum or is malformed


@dataclass(frozen=True)
class ScannedRecord:
    """One valid record found by `scan_records`: its file offset and decoded fields."""

    offset: int
    index: int
    term: int
    data: bytes


@dataclass(frozen=True)
class ScanResult:
    """Valid records from the start of a buffer, where they stop (`end`), and why (`tail`, `reason`)."""

    records: list[ScannedRecord]
    end: int
    tail: TailKind
    reason: str = ""


def _has_zero_sector(buf: bytes | memoryview, start: int, stop: int) -> bool:
    """True if some sector-aligned chunk of ``buf[start:stop]`` is entirely zero (a lost page write)."""
    pos = start
    while pos < stop:
        chunk_end = min(stop, (pos // SECTOR + 1) * SECTOR)
        chunk = buf[pos:chunk_end]
        if len(chunk) >= 8 and not any(chunk):
            return True
        pos = chunk_end
    return False


def scan_records(buf: bytes) -> ScanResult:
    """Decode consecutive records from the start of `buf`.

    Stops at the first record that is not valid and classifies it: TORN when the record runs past the end
    of the buffer, its header is all zeros, or its body contains a zero-filled sector (the footprints of a
    crash during a write), or when it fails its checksum and is the last thing in the buffer; CORRUPT for a
    complete record with a bad checksum or impossible length followed by more data.
    """
    records: list[ScannedRecord] = []
    view = memoryview(buf)
    size = len(buf)
    pos = 0
    while pos < size:
        if size - pos < RECORD_HEADER.size:
            return ScanResult(records, pos, TailKind.TORN, "incomplete record header")
        length, crc = RECORD_HEADER.unpack_from(buf, pos)
        if length == 0 and crc == 0:
            if not any(view[pos:]):
                return ScanResult(records, pos, TailKind.TORN, "zero-filled tail")
            return ScanResult(records, pos, TailKind.CORRUPT, "zero record header followed by data")
        body = pos + RECORD_HEADER.size
        if length > MAX_PAYLOAD or body + length > size:
            # A length past the end of the file is what an interrupted append leaves behind.
            return ScanResult(records, pos, TailKind.TORN, f"record of {length} bytes runs past end of file")
        if length < MIN_PAYLOAD:
            return ScanResult(records, pos, TailKind.CORRUPT, f"record length {length} is too short")
        payload = view[body : body + length]
        if zlib.crc32(payload) != crc:
            if body + length == size or _has_zero_sector(buf, body, body + length):
                return ScanResult(records, pos, TailKind.TORN, "checksum mismatch in the last write")
            return ScanResult(records, pos, TailKind.CORRUPT, "checksum mismatch")
        index, term = ENTRY_HEADER.unpack_from(payload, 0)
        records.append(ScannedRecord(pos, index, term, bytes(payload[MIN_PAYLOAD:])))
        pos = body + length
    return ScanResult(records, pos, TailKind.CLEAN)


_HARD_STATE = struct.Struct("<8sIIQq")  # magic, version, crc, term, voted_for (-1 = none)
_HARD_STATE_MAGIC = b"SPURHS\x00\x01"
_SNAPSHOT = struct.Struct("<8sIIQQQ")  # magic, version, crc, last_index, last_term, data length
_SNAPSHOT_MAGIC = b"SPURSN\x00\x01"
_VERSION = 1


def encode_hard_state(term: int, voted_for: int | None) -> bytes:
    """Return the hard state file contents."""
    vote = -1 if voted_for is None else voted_for
    body = struct.pack("<Qq", term, vote)
    return _HARD_STATE.pack(_HARD_STATE_MAGIC, _VERSION, zlib.crc32(body), term, vote)


def decode_hard_state(buf: bytes) -> tuple[int, int | None]:
    """Return ``(term, voted_for)`` from hard state file contents; raises DecodeError if damaged."""
    if len(buf) != _HARD_STATE.size:
        raise DecodeError(f"expected {_HARD_STATE.size} bytes, found {len(buf)}")
    magic, version, crc, term, vote = _HARD_STATE.unpack(buf)
    if magic != _HARD_STATE_MAGIC:
        raise DecodeError("bad magic (not a Spur hard state file)")
    if version != _VERSION:
        raise DecodeError(f"unsupported version {version}")
    if zlib.crc32(buf[16:]) != crc:
        raise DecodeError("checksum mismatch")
    return term, (None if vote == -1 else vote)


def encode_snapshot_header(last_index: int, last_term: int, data: bytes) -> bytes:
    """Return the snapshot file header; the file is this header followed by `data`."""
    fields = struct.pack("<QQQ", last_index, last_term, len(data))
    crc = zlib.crc32(data, zlib.crc32(fields))
    return _SNAPSHOT.pack(_SNAPSHOT_MAGIC, _VERSION, crc, last_index, last_term, len(data))


def decode_snapshot(buf: bytes) -> tuple[int, int, bytes]:
    """Return ``(last_index, last_term, data)`` from snapshot file contents; raises DecodeError if damaged."""
    if len(buf) < _SNAPSHOT.size:
        raise DecodeError(f"file of {len(buf)} bytes is shorter than the snapshot header")
    magic, version, crc, last_index, last_term, length = _SNAPSHOT.unpack_from(buf, 0)
    if magic != _SNAPSHOT_MAGIC:
        raise DecodeError("bad magic (not a Spur snapshot file)")
    if version != _VERSION:
        raise DecodeError(f"unsupported version {version}")
    if len(buf) != _SNAPSHOT.size + length:
        raise DecodeError(f"header says {length} data bytes, file has {len(buf) - _SNAPSHOT.size}")
    data = buf[_SNAPSHOT.size :]
    if zlib.crc32(data, zlib.crc32(buf[16 : _SNAPSHOT.size])) != crc:
        raise DecodeError("checksum mismatch")
    return last_index, last_term, data
