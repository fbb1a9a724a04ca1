"""Durable Raft storage: hard state, one snapshot, and the log as WAL segment files in one directory.

Directory layout::

    LOCK                      flock'd while a RaftStorage has the directory open (one process at a time)
    hardstate                 current term and vote (replaced atomically)
    snapshot                  latest snapshot (replaced atomically)
    wal-<first index:020d>.log  log segments; records as described in `spur.raft.codec`

All methods are blocking and thread-safe (one internal lock), so a Trio caller runs them in a worker thread.
`save_snapshot` writes the snapshot file without holding that lock, so appends continue meanwhile.

Crash safety rules that `load` relies on:
* a segment is only started after the previous one is fully fsync'd, so only the last segment may end in
  a torn write; a torn tail there is cut off, anything malformed elsewhere is a `CorruptLogError`;
* a segment's entries end where the next segment begins; a segment whose range ends at or before the
  snapshot index is obsolete and removed (this finishes a compaction interrupted by a crash);
* if the log holds the snapshot's index with a different term, or ends at or before it, the whole log is
  obsolete (Raft's InstallSnapshot rule) and is removed.

Damage a crash cannot explain is a `CorruptLogError` from a strict `load()`. ``load(salvage=True)`` (what a
Raft member uses at start) instead keeps what is intact, logs one warning line per damaged file naming it
and the problem, and sets the damaged bytes aside under ``<name>.corrupt`` (never deleted, for the
operator): an undecodable snapshot file is set aside (the log then stands alone, or is set aside too when
it does not start at index 1); a segment is cut back to its last valid record, and every later segment is
set aside. `discard_snapshot` sets aside a snapshot the state machine cannot read, with the whole log.
A damaged hard state file stays an error: a vote cannot be guessed.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spur.raft import codec
from spur.raft.fileio import atomic_write, fsync_dir, fsync_fd, truncate, write_all

log = logging.getLogger(__name__)

HARD_STATE_FILE = "hardstate"
SNAPSHOT_FILE = "snapshot"
LOCK_FILE = "LOCK"
_SEGMENT_RE = re.compile(r"^wal-(\d{20})\.log$")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
# How long a lock still held by another process is waited for (see RaftStorage).
LOCK_WAIT_SECS = 2.0


def segment_name(first_index: int) -> str:
    """File name of the segment whose first entry has index `first_index`."""
    return f"wal-{first_index:020d}.log"


@dataclass(frozen=True)
class LogEntry:
    """One Raft log entry. `data` is opaque to Raft (the state machine's command)."""

    index: int
    term: int
    data: bytes


@dataclass(frozen=True)
class HardState:
    """State Raft must persist before answering any RPC: the current term and the vote cast in it."""

    term: int = 0
    voted_for: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """State machine image covering every entry up to and including `last_index` (written in `last_term`)."""

    last_index: int
    last_term: int
    data: bytes


class StorageError(Exception):
    """Storage I/O failed (fsync error, disk full, ...) or the files on disk cannot be used.

    After a failed write the storage stays consistent: the failed entries are not part of the log in memory,
    and the file is cut back to its last good length (now, or before the next write if that cut also fails).
    """


class CorruptLogError(StorageError):
    """A file in the storage directory is damaged in a way a crash cannot explain."""

    def __init__(self, path: Path, offset: int | None, reason: str) -> None:
        where = f"{path} at offset {offset}" if offset is not None else str(path)
        super().__init__(f"corrupt Raft storage: {where}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


@dataclass
class _Segment:
    """In-memory index of one segment file: where each record starts and its term."""

    path: Path
    first_index: int
    offsets: list[int] = field(default_factory=list)
    terms: list[int] = field(default_factory=list)
    size: int = 0  # length of the valid records; the file is cut back to this after a failed write

    @property
    def last_index(self) -> int:
        """Index of the last entry (``first_index - 1`` when empty)."""
        return self.first_index + len(self.offsets) - 1


def _os_error(action: str, exc: OSError) -> StorageError:
    reason = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    return StorageError(f"{action} failed: {reason}{where}")


class RaftStorage:
    """The durable state of one Raft member, kept in `directory` (created if missing).

    Call `load` once before any other method; it recovers from a crash (see the module docstring) and
    returns what is stored. With ``fsync=False`` nothing is fsync'd (tests, benchmarks): a process crash
    loses nothing, a power loss may. `segment_bytes` is the size after which a new segment file is started.
    Raises StorageError if the directory cannot be created or is in use by another RaftStorage. A lock
    still held is waited for up to `lock_wait_secs`: a member killed just after forking a snapshot child
    (spur.raft.forked) leaves the lock with that child until it has closed its inherited descriptors,
    a moment later.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        fsync: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        lock_wait_secs: float = LOCK_WAIT_SECS,
    ) -> None:
        if segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        self._dir = Path(directory)
        self._sync = fsync
        self._segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._snapshot_lock = threading.Lock()
        self._segments: list[_Segment] = []
        self._fd: int | None = None  # append descriptor of self._segments[-1]
        self._needs_repair = False
        self._garbage: list[_Segment] = []  # obsolete segment files still to be removed
        self._snap_index = 0
        self._snap_term = 0
        self._loaded = False
        self._closed = False
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _os_error(f"opening Raft storage directory {self._dir}", exc) from exc
        deadline = time.monotonic() + lock_wait_secs
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                busy = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
                if busy and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                os.close(self._lock_fd)
                if busy:
                    raise StorageError(
                        f"Raft storage directory {self._dir} is in use by another process"
                    ) from exc
                raise _os_error(f"locking Raft storage directory {self._dir}", exc) from exc

    @property
    def directory(self) -> Path:
        """The storage directory."""
        return self._dir

    @property
    def fsync(self) -> bool:
        """Whether writes are fsync'd (False: only page-cache writes, cheap enough to call inline)."""
        return self._sync

    @property
    def last_index(self) -> int:
        """Index of the last log entry, or the snapshot index when the log after it is empty."""
        with self._lock:
            return self._last_index()

    @property
    def snapshot_index(self) -> int:
        """`last_index` of the stored snapshot (0 when there is none)."""
        with self._lock:
            return self._snap_index

    # -- load -------------------------------------------------------------------------------------------

    def load(self, *, salvage: bool = False) -> tuple[HardState, Snapshot | None, list[LogEntry]]:
        """Recover and return ``(hard state, snapshot or None, log entries after the snapshot)``.

        Cuts off a torn last record, finishes interrupted compactions, removes stray temporary files.
        Raises CorruptLogError for damage a crash cannot cause (naming file and offset), unless `salvage`:
        then damaged snapshot and log files are set aside as the module docstring says, and only a
        damaged hard state raises. StorageError for I/O failures.
        """
        with self._lock:
            self._check_open()
            self._close_fd()
            self._segments = []
            self._garbage = []
            self._loaded = False
            try:
                result = self._load(salvage)
            except OSError as exc:
                raise _os_error(f"loading Raft storage from {self._dir}", exc) from exc
            self._loaded = True
            return result

    def _load(self, salvage: bool) -> tuple[HardState, Snapshot | None, list[LogEntry]]:
        for stray in self._dir.glob("*.tmp"):
            stray.unlink()
        hard_state = self._read_hard_state()
        snapshot = self._read_snapshot(salvage)
        snap_index, snap_term = (snapshot.last_index, snapshot.last_term) if snapshot else (0, 0)

        listed = self._list_segments()
        removed = False
        live: list[tuple[int, Path]] = []
        for i, (first, path) in enumerate(listed):
            if i + 1 < len(listed) and listed[i + 1][0] - 1 <= snap_index:
                path.unlink()
                removed = True
            else:
                live.append((first, path))

        entries: list[LogEntry] = []
        for i, (first, path) in enumerate(live):
            if self._segments and first != self._segments[-1].last_index + 1:
                prev = self._segments[-1]
                damage = CorruptLogError(
                    path,
                    None,
                    f"segment starts at index {first} but {prev.path.name} ends at {prev.last_index}",
                )
                if not salvage:
                    raise damage
                self._set_aside([p for _, p in live[i:]], damage)
                removed = True
                break
            segment, seg_entries, damaged = self._scan_segment(
                first, path, is_last=i == len(live) - 1, salvage=salvage
            )
            self._segments.append(segment)
            entries.extend(seg_entries)
            if damaged:
                if i + 1 < len(live):
                    self._set_aside([p for _, p in live[i + 1 :]], None)
                removed = True
                break

        if self._segments:
            first, last = self._segments[0].first_index, self._segments[-1].last_index
            if first > snap_index + 1:
                have = f"the snapshot ends at {snap_index}" if snapshot else "there is no snapshot"
                damage = CorruptLogError(
                    self._segments[0].path,
                    None,
                    f"log starts at index {first} but {have}; entries are missing",
                )
                if not salvage:
                    raise damage
                self._set_aside([segment.path for segment in self._segments], damage)
                self._segments = []
                entries = []
                removed = True
        if self._segments:
            first, last = self._segments[0].first_index, self._segments[-1].last_index
            if snapshot is not None:
                if last <= snap_index or (
                    first <= snap_index and entries[snap_index - first].term != snap_term
                ):
                    for segment in reversed(self._segments):
                        segment.path.unlink()
                    self._segments = []
                    entries = []
                    removed = True
                else:
                    entries = entries[max(0, snap_index + 1 - first) :]
        if removed:
            fsync_dir(self._dir, self._sync)
        self._snap_index, self._snap_term = snap_index, snap_term
        if self._segments:
            self._fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)
        return hard_state, snapshot, entries

    def _read_hard_state(self) -> HardState:
        path = self._dir / HARD_STATE_FILE
        try:
            buf = path.read_bytes()
        except FileNotFoundError:
            return HardState()
        try:
            term, voted_for = codec.decode_hard_state(buf)
        except codec.DecodeError as exc:
            raise CorruptLogError(path, None, str(exc)) from exc
        return HardState(term, voted_for)

    def _read_snapshot(self, salvage: bool) -> Snapshot | None:
        path = self._dir / SNAPSHOT_FILE
        try:
            buf = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            last_index, last_term, data = codec.decode_snapshot(buf)
        except codec.DecodeError as exc:
            damage = CorruptLogError(path, None, str(exc))
            if not salvage:
                raise damage from exc
            self._set_aside([path], damage)
            fsync_dir(self._dir, self._sync)
            return None
        return Snapshot(last_index, last_term, data)

    def _set_aside(self, paths: Sequence[Path], damage: CorruptLogError | None) -> None:
        """Rename `paths` to ``<name>.corrupt`` (replacing older ones); log `damage` (or that they follow
        a damaged file) in one line."""
        for path in paths:
            path.rename(path.with_name(path.name + ".corrupt"))
        names = ", ".join(p.name for p in paths)
        if damage is not None:
            log.warning("%s; set aside (%s -> *.corrupt), recovering from what is intact", damage, names)
        elif paths:
            log.warning("set aside log segments after a damaged one: %s -> *.corrupt", names)

    def _list_segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in self._dir.iterdir():
            match = _SEGMENT_RE.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        found.sort()
        return found

    def _scan_segment(
        self, first: int, path: Path, *, is_last: bool, salvage: bool
    ) -> tuple[_Segment, list[LogEntry], bool]:
        """The segment's valid records; with `salvage`, damage cuts the file back to the records before it
        (the cut bytes are kept in ``<name>.corrupt``) and the third value is True."""
        buf = path.read_bytes()
        scan = codec.scan_records(buf)
        damage: CorruptLogError | None = None
        if scan.tail is codec.TailKind.CORRUPT or (scan.tail is codec.TailKind.TORN and not is_last):
            damage = CorruptLogError(path, scan.end, scan.reason)
        segment = _Segment(path, first, size=scan.end)
        entries = []
        prev_term = 0
        for rec in scan.records:
            expected = first + len(segment.offsets)
            if rec.index != expected:
                damage = CorruptLogError(
                    path, rec.offset, f"record holds index {rec.index}, expected {expected}"
                )
            elif rec.term < prev_term:
                damage = CorruptLogError(
                    path, rec.offset, f"term {rec.term} of index {rec.index} went backwards"
                )
            if damage is not None and damage.offset == rec.offset:
                segment.size = rec.offset
                break
            prev_term = rec.term
            segment.offsets.append(rec.offset)
            segment.terms.append(rec.term)
            entries.append(LogEntry(rec.index, rec.term, rec.data))
        if damage is not None:
            if not salvage:
                raise damage
            aside = path.with_name(path.name + ".corrupt")
            atomic_write(aside, [buf[segment.size :]], self._sync)
            log.warning(
                "%s; cut back to %d valid entries (the %d bytes after them kept in %s)",
                damage,
                len(entries),
                len(buf) - segment.size,
                aside.name,
            )
            truncate(path, segment.size, self._sync)
            return segment, entries, True
        if scan.tail is codec.TailKind.TORN:
            log.warning(
                "discarding torn tail of %s at offset %d (%d bytes): %s",
                path,
                scan.end,
                len(buf) - scan.end,
                scan.reason,
            )
            truncate(path, scan.end, self._sync)
        return segment, entries, False

    # -- writes -----------------------------------------------------------------------------------------

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append `entries` (consecutive, starting right after the last index); durable when it returns.

        One write and one fsync for the whole batch. Raises ValueError for entries that do not continue the
        log, StorageError if the write fails (the entries are then not in the log).
        """
        if not entries:
            return
        with self._lock:
            self._check_ready()
            expected = self._last_index() + 1
            prev_term = self._last_term()
            chunks = []
            for entry in entries:
                if entry.index != expected:
                    raise ValueError(
                        f"log entry index {entry.index} does not follow last index {expected - 1}"
                    )
                if entry.term < prev_term:
                    raise ValueError(
                        f"log entry {entry.index} has term {entry.term} < previous term {prev_term}"
                    )
                chunks.append(codec.encode_record(entry.index, entry.term, entry.data))
                expected += 1
                prev_term = entry.term
            first, last = entries[0].index, entries[-1].index
            try:
                if self._needs_repair:
                    self._repair()
                segment = self._writable_segment(first)
                assert self._fd is not None
                write_all(self._fd, b"".join(chunks))
                fsync_fd(self._fd, self._sync)
            except OSError as exc:
                self._needs_repair = True
                self._try_repair()
                raise _os_error(f"appending log entries {first}..{last} to {self._dir}", exc) from exc
            pos = segment.size
            for entry, chunk in zip(entries, chunks, strict=True):
                segment.offsets.append(pos)
                segment.terms.append(entry.term)
                pos += len(chunk)
            segment.size = pos

    def truncate_from(self, index: int) -> None:
        """Drop every entry with index >= `index` (a follower resolving a conflict with the leader).

        A no-op when `index` is past the last entry. Raises ValueError when `index` is at or below the
        snapshot index (those entries are committed), StorageError on I/O failure (then retry).
        """
        with self._lock:
            self._check_ready()
            if index <= self._snap_index:
                raise ValueError(
                    f"cannot truncate the log at {index}: entries up to {self._snap_index} are compacted"
                )
            if index > self._last_index():
                return
            try:
                if self._needs_repair:
                    self._repair()
                removed = False
                # Newest segments first, so a crash leaves a prefix of the log.
                while self._segments and self._segments[-1].first_index >= index:
                    self._close_fd()
                    self._segments[-1].path.unlink()
                    self._segments.pop()
                    removed = True
                if removed:
                    fsync_dir(self._dir, self._sync)
                if not self._segments:
                    return
                segment = self._segments[-1]
                if self._fd is None:
                    self._fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
                keep = index - segment.first_index
                if keep < len(segment.offsets):
                    cut = segment.offsets[keep]
                    os.ftruncate(self._fd, cut)
                    del segment.offsets[keep:]
                    del segment.terms[keep:]
                    segment.size = cut
                    fsync_fd(self._fd, self._sync)
            except OSError as exc:
                self._needs_repair = True
                raise _os_error(f"truncating the log at index {index} in {self._dir}", exc) from exc

    def save_hard_state(self, hs: HardState) -> None:
        """Replace the stored hard state atomically and durably. Raises StorageError on failure."""
        if hs.term < 0 or (hs.voted_for is not None and hs.voted_for < 0):
            raise ValueError(f"invalid hard state {hs}")
        with self._lock:
            self._check_ready()
            try:
                atomic_write(
                    self._dir / HARD_STATE_FILE, [codec.encode_hard_state(hs.term, hs.voted_for)], self._sync
                )
            except OSError as exc:
                raise _os_error(f"saving hard state {hs} in {self._dir}", exc) from exc

    def save_snapshot(self, snap: Snapshot) -> None:
        """Store `snap` atomically and durably, then compact the log.

        Entries after ``snap.last_index`` are kept if the log holds that index with ``snap.last_term``;
        otherwise (a snapshot from a leader that replaces a divergent or shorter log) the whole log is
        dropped and the next append must be at ``snap.last_index + 1``. Re-saving the current snapshot index
        is allowed (retry after a failure); an older one is a ValueError. StorageError on I/O failure: if
        the snapshot file was written it stays authoritative, and a retry finishes the compaction.
        """
        if snap.last_index < 1 or snap.last_term < 0:
            raise ValueError(f"invalid snapshot position index={snap.last_index} term={snap.last_term}")
        with self._snapshot_lock:
            with self._lock:
                self._check_ready()
                if snap.last_index < self._snap_index:
                    raise ValueError(
                        f"snapshot at {snap.last_index} is older than the stored one at {self._snap_index}"
                    )
            header = codec.encode_snapshot_header(snap.last_index, snap.last_term, snap.data)
            try:
                atomic_write(self._dir / SNAPSHOT_FILE, [header, snap.data], self._sync)
            except OSError as exc:
                raise _os_error(f"saving snapshot at index {snap.last_index} in {self._dir}", exc) from exc
            with self._lock:
                self._check_ready()
                try:
                    self._compact(snap.last_index, snap.last_term)
                except OSError as exc:
                    raise _os_error(
                        f"compacting the log up to {snap.last_index} in {self._dir}", exc
                    ) from exc

    def discard_snapshot(self) -> None:
        """Set aside the stored snapshot and the whole log (``*.corrupt``): the state machine cannot read
        the snapshot, and the log after it means nothing without it. The storage is then empty except for
        the hard state (the term and vote stay: they are promises to other members)."""
        with self._snapshot_lock, self._lock:
            self._check_ready()
            self._close_fd()
            paths = [segment.path for segment in self._segments]
            snapshot = self._dir / SNAPSHOT_FILE
            if snapshot.exists():
                paths.insert(0, snapshot)
            try:
                for path in paths:
                    path.rename(path.with_name(path.name + ".corrupt"))
                fsync_dir(self._dir, self._sync)
            except OSError as exc:
                raise _os_error(f"setting aside the snapshot in {self._dir}", exc) from exc
            self._segments = []
            self._garbage = []
            self._snap_index = self._snap_term = 0
            self._needs_repair = False

    def close(self) -> None:
        """Close files and release the directory lock. Idempotent; the object is unusable afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_fd()
            os.close(self._lock_fd)

    # -- internals (called with self._lock held) ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"Raft storage {self._dir} is closed")

    def _check_ready(self) -> None:
        self._check_open()
        if not self._loaded:
            raise StorageError(f"Raft storage {self._dir}: load() must be called first")

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _last_index(self) -> int:
        return self._segments[-1].last_index if self._segments else self._snap_index

    def _last_term(self) -> int:
        for segment in reversed(self._segments):
            if segment.terms:
                return segment.terms[-1]
        return self._snap_term

    def _term_at(self, index: int) -> int | None:
        if index == self._snap_index:
            return self._snap_term
        for segment in self._segments:
            if segment.first_index <= index <= segment.last_index:
                return segment.terms[index - segment.first_index]
        return None

    def _repair(self) -> None:
        """Cut the active segment back to its last good length after a failed write."""
        if self._segments:
            segment = self._segments[-1]
            if self._fd is None:
                self._fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
            os.ftruncate(self._fd, segment.size)
            fsync_fd(self._fd, self._sync)
        self._needs_repair = False

    def _try_repair(self) -> None:
        try:
            self._repair()
        except OSError as exc:
            log.warning("could not cut back %s after a failed write (will retry): %s", self._dir, exc)

    def _writable_segment(self, first_index: int) -> _Segment:
        """The segment to append entries starting at `first_index` to, starting a new one if needed."""
        if self._segments and self._segments[-1].size < self._segment_bytes:
            return self._segments[-1]
        path = self._dir / segment_name(first_index)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            fsync_dir(self._dir, self._sync)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._close_fd()
        self._fd = fd
        segment = _Segment(path, first_index)
        self._segments.append(segment)
        self._garbage = [g for g in self._garbage if g.path != path]
        return segment

    def _compact(self, snap_index: int, snap_term: int) -> None:
        """Drop log entries covered by a just-saved snapshot at (snap_index, snap_term)."""
        keep_tail = self._term_at(snap_index) == snap_term and snap_index <= self._last_index()
        self._snap_index, self._snap_term = snap_index, snap_term
        if not keep_tail:
            self._close_fd()
            self._garbage.extend(self._segments)
            self._segments = []
        else:
            kept: list[_Segment] = []
            for segment in self._segments:
                if segment.last_index <= snap_index:
                    self._garbage.append(segment)
                elif segment.first_index <= snap_index:
                    kept.append(self._rewrite_tail(segment, snap_index + 1))
                else:
                    kept.append(segment)
            if not kept:
                self._close_fd()
            self._segments = kept
        self._collect_garbage()

    def _rewrite_tail(self, segment: _Segment, first_index: int) -> _Segment:
        """Copy the entries from `first_index` on out of `segment` into a new segment file."""
        skip = first_index - segment.first_index
        base = segment.offsets[skip]
        with open(segment.path, "rb") as f:
            f.seek(base)
            tail = f.read(segment.size - base)
        path = self._dir / segment_name(first_index)
        atomic_write(path, [tail], self._sync)
        new = _Segment(
            path,
            first_index,
            offsets=[off - base for off in segment.offsets[skip:]],
            terms=segment.terms[skip:],
            size=segment.size - base,
        )
        if self._segments and self._segments[-1] is segment:
            self._close_fd()
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._garbage = [g for g in self._garbage if g.path != path]
        self._garbage.append(segment)
        return new

    def _collect_garbage(self) -> None:
        live = {segment.path for segment in self._segments}
        # Newest first, so a crash part-way leaves a prefix of any dropped log.
        self._garbage.sort(key=lambda s: s.first_index, reverse=True)
        while self._garbage:
            segment = self._garbage[0]
            if segment.path not in live:
                segment.path.unlink(missing_ok=True)
            self._garbage.pop(0)
        fsync_dir(self._dir, self._sync)
