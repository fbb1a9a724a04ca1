"""HPACK (RFC 7541): a stateless literal encoding, a stateful indexing encoder and a full decoder.

Pure (no I/O) and cheap to import: the blocking CLI client (:mod:`spur.rpc.h2_unary`) uses it instead
of the ``hpack`` package, whose import (with ``h2``'s) cost a query command a quarter of its start-up.

Contracts:

- :func:`encode_block` writes every header as a literal without indexing, never Huffman-coded, so
  the encoder keeps no state and the peer's decoder does no work beyond copying.
- :class:`Encoder` (one per connection, every block it makes sent in order) refers to what the peer's
  decoder already holds: a (name, value) of the static table or one it inserted before is one indexed
  field; a new pair is a literal (never Huffman-coded) with incremental indexing when its entry is at
  most ``index_limit`` bytes and its name is not in ``unindexed``, else a literal without indexing. Its
  dynamic table follows RFC 7541 section 4 exactly (entry size = name + value octets + 32, oldest
  evicted first); its size is the peer's SETTINGS_HEADER_TABLE_SIZE (:meth:`Encoder.set_max_table_size`)
  capped at ``max_table_cap`` (so a peer cannot make us hold more), and every change is signalled at the
  start of the next block (the smallest size reached, then the final one).
- :class:`Decoder` decodes any block a conforming encoder sends (indexed fields, literals with and
  without indexing, never-indexed literals, Huffman strings, dynamic table size updates), keeping the
  dynamic table across blocks of one connection, so every block received must be fed in order.
  Headers come back as ``(name, value)`` byte pairs. Malformed input raises :class:`HpackError`.
  Blocks that neither read nor change a dynamic table (static indices and literals without indexing,
  as :func:`encode_block` writes them) decode the same on every connection: small ones are remembered
  by value, process-wide (at most ``_DECODED_MAX`` of them, forgotten all at once when full), so a
  peer's repeated response headers and trailers are decoded once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

__all__ = ["Decoder", "Encoder", "HpackError", "encode_block", "STATIC_TABLE"]


class HpackError(ValueError):
    """A header block that does not decode (the connection must be dropped)."""


# RFC 7541 appendix B: the Huffman code of each symbol 0-256 (256 is EOS), and its length in bits.
_HUFFMAN_CODES = (
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7,
    0xfffffe8, 0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec,
    0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3,
    0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb,
    0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa,
    0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
    0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
    0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62,
    0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a,
    0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72,
    0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22,
    0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26,
    0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7,
    0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78,
    0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc,
    0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5, 0x7fffd9,
    0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
    0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef,
    0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde,
    0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec,
    0x1fffe0, 0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef,
    0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1,
    0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec,
    0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed,
    0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2,
    0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5,
    0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4,
    0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea,
    0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
    0x3fffffff,
)
_HUFFMAN_LENGTHS = bytes.fromhex(
    "0d171c1c1c1c1c1c1c181e1c1c1e1c1c1c1c1c1c1c1c1e1c1c1c1c1c1c1c1c1c060a0a0c0d06080b0a0a080b08060606"
    "0505050606060606060607080f060c0a0d06070707070707070707070707070707070707070707070807080d130d0e06"
    "0f05060506050606060507070606060506070605050607070707070f0b0e0d1c14161414161616171617171717171817"
    "181816171817171717151617161717181615141616171715171616181516171715151615171617171416161617161617"
    "1a1a1413161716191a1a1a1b1b1a181913151a1b1b1a1b1815151a1a1c1b1b1b14181415161515171616191918181a17"
    "1a1b1a1a1b1b1b1b1b1c1b1b1b1b1b1a1e"
)
STATIC_TABLE = (
    (b':authority', b''),
    (b':method', b'GET'),
    (b':method', b'POST'),
    (b':path', b'/'),
    (b':path', b'/index.html'),
    (b':scheme', b'http'),
    (b':scheme', b'https'),
    (b':status', b'200'),
    (b':status', b'204'),
    (b':status', b'206'),
    (b':status', b'304'),
    (b':status', b'400'),
    (b':status', b'404'),
    (b':status', b'500'),
    (b'accept-charset', b''),
    (b'accept-encoding', b'gzip, deflate'),
    (b'accept-language', b''),
    (b'accept-ranges', b''),
    (b'accept', b''),
    (b'access-control-allow-origin', b''),
    (b'age', b''),
    (b'allow', b''),
    (b'authorization', b''),
    (b'cache-control', b''),
    (b'content-disposition', b''),
    (b'content-encoding', b''),
    (b'content-language', b''),
    (b'content-length', b''),
    (b'content-location', b''),
    (b'content-range', b''),
    (b'content-type', b''),
    (b'cookie', b''),
    (b'date', b''),
    (b'etag', b''),
    (b'expect', b''),
    (b'expires', b''),
    (b'from', b''),
    (b'host', b''),
    (b'if-match', b''),
    (b'if-modified-since', b''),
    (b'if-none-match', b''),
    (b'if-range', b''),
    (b'if-unmodified-since', b''),
    (b'last-modified', b''),
    (b'link', b''),
    (b'location', b''),
    (b'max-forwards', b''),
    (b'proxy-authenticate', b''),
    (b'proxy-authorization', b''),
    (b'range', b''),
    (b'referer', b''),
    (b'refresh', b''),
    (b'retry-after', b''),
    (b'server', b''),
    (b'set-cookie', b''),
    (b'strict-transport-security', b''),
    (b'transfer-encoding', b''),
    (b'user-agent', b''),
    (b'vary', b''),
    (b'via', b''),
    (b'www-authenticate', b''),
)


_DECODE: dict[tuple[int, int], int] = {}


def _huffman_table() -> dict[tuple[int, int], int]:
    """(bit length, code) -> symbol, built on first use (most blocks carry no Huffman string)."""
    if not _DECODE:
        _DECODE.update(
            ((n, code), sym) for sym, (code, n) in enumerate(zip(_HUFFMAN_CODES, _HUFFMAN_LENGTHS, strict=True))
        )
    return _DECODE


def huffman_decode(data: bytes) -> bytes:
    """Decode a Huffman-coded string; raises HpackError on EOS, a bad code or bad padding."""
    table = _huffman_table()
    out = bytearray()
    code = n = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            n += 1
            sym = table.get((n, code))
            if sym is not None:
                if sym == 256:
                    raise HpackError("Huffman string contains EOS")
                out.append(sym)
                code = n = 0
            elif n > 30:
                raise HpackError("invalid Huffman code")
    if n > 7 or code != (1 << n) - 1:
        raise HpackError("invalid Huffman padding")
    return bytes(out)


def _encode_int(value: int, prefix_bits: int, first: int) -> bytearray:
    """An HPACK integer with an N-bit prefix; ``first`` holds the bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytearray((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return out


def _encode_str(data: bytes) -> bytes:
    return bytes(_encode_int(len(data), 7, 0)) + data


def encode_block(headers: list[tuple[str, str]]) -> bytes:
    """A header block of literals without indexing (names and values UTF-8, not Huffman-coded)."""
    out = bytearray()
    for name, value in headers:
        out.append(0)
        out += _encode_str(name.encode())
        out += _encode_str(value.encode())
    return bytes(out)


# Static table lookups for the encoder: (name, value) -> index, and name -> its first index.
_STATIC_PAIRS = {(n.decode(), v.decode()): i for i, (n, v) in enumerate(STATIC_TABLE, 1)}
_STATIC_NAMES = {n.decode(): i for i, (n, _) in reversed(list(enumerate(STATIC_TABLE, 1)))}
_STATIC_INDEXED = {pair: bytes((0x80 | i,)) for pair, i in _STATIC_PAIRS.items()}


class Encoder:
    """HPACK encoder with its dynamic table (one per connection; see the module docstring)."""

    def __init__(
        self,
        *,
        index_limit: int = 4096,
        unindexed: frozenset[str] = frozenset(),
        max_table_cap: int = 65536,
    ) -> None:
        """``index_limit``: the largest entry (bytes, with its 32 of overhead) inserted into the table;
        ``unindexed``: names whose values are never inserted (one value per block, e.g. a deadline);
        ``max_table_cap``: the largest table we keep, whatever the peer allows."""
        self.index_limit = index_limit
        self.unindexed = unindexed
        self.max_table_cap = max_table_cap
        self.max_size = 4096  # the table size the peer's decoder has been told (HTTP/2's default)
        self.size = 0
        self._entries: deque[tuple[tuple[str, str], int, int]] = deque()  # (pair, size, number), oldest first
        self._inserted = 0  # entries ever inserted: entry number n has dynamic index 62 + inserted - 1 - n
        self._pairs: dict[tuple[str, str], int] = {}  # pair in the table -> its entry number
        self._names: dict[str, int] = {}  # name -> the number of its newest entry
        # Indexed fields by pair: the static table's, and those of dynamic entries met since the table
        # last changed (an insertion renumbers every dynamic entry; see _renumber).
        self._fields = dict(_STATIC_INDEXED)
        self._dynamic_fields: list[tuple[str, str]] = []
        self._lowest: int | None = None  # smallest size set since the last block (None: unchanged)
        self._target = 4096  # the size to use from the next block

    def set_max_table_size(self, size: int) -> None:
        """The peer's SETTINGS_HEADER_TABLE_SIZE changed to ``size``: used from the next block."""
        size = min(size, self.max_table_cap)
        self._target = size
        if self._lowest is None or size < self._lowest:
            self._lowest = size

    def encode(self, headers: Iterable[tuple[str, str]]) -> bytes:
        """One header block; the table changes as the peer's decoder will change it."""
        out = bytearray()
        if self._lowest is not None:
            if self._lowest < self.max_size:
                self._resize(self._lowest, out)
            if self._target != self.max_size:
                self._resize(self._target, out)
            self._lowest = None
        fields = self._fields
        for pair in headers:
            field = fields.get(pair)
            if field is None:
                number = self._pairs.get(pair)
                if number is None:
                    self._literal(pair, out)
                    continue
                index = 61 + self._inserted - number
                field = bytes((0x80 | index,)) if index < 127 else bytes(_encode_int(index, 7, 0x80))
                fields[pair] = field
                self._dynamic_fields.append(pair)
            out += field
        return bytes(out)

    def _literal(self, pair: tuple[str, str], out: bytearray) -> None:
        name, value = pair
        raw_value = value.encode()
        name_index = _STATIC_NAMES.get(name)
        if name_index is None:
            number = self._names.get(name)
            if number is not None:
                name_index = 61 + self._inserted - number
        raw_name = name.encode()
        size = len(raw_name) + len(raw_value) + 32
        indexed = size <= self.index_limit and size <= self.max_size and name not in self.unindexed
        prefix, first = (6, 0x40) if indexed else (4, 0x00)
        if name_index is None:
            out.append(first)
            out += _encode_str(raw_name)
        else:
            out += _encode_int(name_index, prefix, first)
        out += _encode_str(raw_value)
        if indexed:
            self._renumber()
            self._evict(self.max_size - size)
            self._entries.append((pair, size, self._inserted))
            self._pairs[pair] = self._names[name] = self._inserted
            self._inserted += 1
            self.size += size

    def _resize(self, size: int, out: bytearray) -> None:
        out += _encode_int(size, 5, 0x20)
        self.max_size = size
        self._renumber()
        self._evict(size)

    def _renumber(self) -> None:
        """The dynamic table is about to change: forget the indexed fields of its entries."""
        for pair in self._dynamic_fields:
            del self._fields[pair]
        self._dynamic_fields.clear()

    def _evict(self, room: int) -> None:
        """Drop the oldest entries until the table holds at most ``room`` bytes."""
        while self.size > room:
            pair, size, number = self._entries.popleft()
            self.size -= size
            del self._pairs[pair]
            if self._names.get(pair[0]) == number:
                del self._names[pair[0]]


# Blocks that use no dynamic table, decoded (see the module docstring).
_DECODED: dict[bytes, tuple[tuple[bytes, bytes], ...]] = {}
_DECODED_MAX = 256
_DECODED_BLOCK_MAX = 512  # bytes: larger blocks are decoded every time


class Decoder:
    """HPACK decoder with its dynamic table (one per connection)."""

    def __init__(self, max_table_size: int = 4096) -> None:
        # ``max_table_size``: what our SETTINGS_HEADER_TABLE_SIZE allows (4096, the default).
        self.max_allowed = max_table_size
        self.max_size = max_table_size
        self.size = 0
        self.table: list[tuple[bytes, bytes]] = []  # newest first

    def _entry(self, index: int) -> tuple[bytes, bytes]:
        if index <= 0:
            raise HpackError("header index 0")
        if index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dyn = index - len(STATIC_TABLE) - 1
        if dyn >= len(self.table):
            raise HpackError(f"header index {index} is beyond the table")
        return self.table[dyn]

    def _add(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 32
        self.table.insert(0, (name, value))
        self.size += size
        self._evict()

    def _evict(self) -> None:
        while self.size > self.max_size and self.table:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        """The headers of one complete header block (HEADERS + CONTINUATION payloads joined)."""
        known = _DECODED.get(block)
        if known is not None:
            return list(known)
        out: list[tuple[bytes, bytes]] = []
        stateless = True  # no dynamic table read or changed so far
        pos, end = 0, len(block)
        data = memoryview(block)

        def integer(prefix_bits: int) -> int:
            nonlocal pos
            limit = (1 << prefix_bits) - 1
            value = data[pos] & limit
            pos += 1
            if value < limit:
                return value
            shift = 0
            while True:
                if pos >= end:
                    raise HpackError("truncated integer")
                byte = data[pos]
                pos += 1
                value += (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    return value
                if shift > 28:
                    raise HpackError("integer too large")

        def string() -> bytes:
            nonlocal pos
            if pos >= end:
                raise HpackError("truncated string")
            huffman = data[pos] & 0x80
            length = integer(7)
            if pos + length > end:
                raise HpackError("truncated string")
            raw = bytes(data[pos : pos + length])
            pos += length
            return huffman_decode(raw) if huffman else raw

        while pos < end:
            first = data[pos]
            if first & 0x80:  # indexed header field
                index = integer(7)
                stateless = stateless and index <= len(STATIC_TABLE)
                out.append(self._entry(index))
            elif first & 0x40:  # literal with incremental indexing
                stateless = False
                index = integer(6)
                name = self._entry(index)[0] if index else string()
                value = string()
                self._add(name, value)
                out.append((name, value))
            elif first & 0x20:  # dynamic table size update
                stateless = False
                size = integer(5)
                if size > self.max_allowed:
                    raise HpackError(f"table size {size} above the allowed {self.max_allowed}")
                self.max_size = size
                self._evict()
            else:  # literal without indexing (0000) or never indexed (0001)
                index = integer(4)
                stateless = stateless and index <= len(STATIC_TABLE)
                name = self._entry(index)[0] if index else string()
                out.append((name, string()))
        if stateless and len(block) <= _DECODED_BLOCK_MAX and type(block) is bytes:
            if len(_DECODED) >= _DECODED_MAX:
                _DECODED.clear()
            _DECODED[block] = tuple(out)
        return out
