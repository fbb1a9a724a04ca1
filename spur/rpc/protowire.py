"""Protobuf's base-128 integers, shared by the two wire codecs: the protobuf-free one the commands
use (:mod:`spur.rpc.lite`) and the hand-written encodings beside protobuf's (:mod:`spur.rpc.convert`).
Pure and import-free, so the commands' start-up pays nothing for it."""

from __future__ import annotations

__all__ = ["put_varint", "varint"]


def put_varint(out: bytearray, n: int) -> None:
    """Append ``n`` as protobuf writes a varint; a negative int32/int64 takes ten bytes of two's
    complement, as protobuf writes them."""
    if n < 0:
        n += 1 << 64
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def varint(n: int) -> bytes:
    """``n`` as protobuf writes a varint (see :func:`put_varint`)."""
    out = bytearray()
    put_varint(out, n)
    return bytes(out)
