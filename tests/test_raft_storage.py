"""RaftStorage: WAL round trips, crash recovery, corruption detection, compaction, I/O failures."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from spur.raft import codec
from spur.raft.storage import (
    CorruptLogError,
    HardState,
    LogEntry,
    RaftStorage,
    Snapshot,
    StorageError,
    segment_name,
)


def entries(first: int, last: int, term: int = 1) -> list[LogEntry]:
    return [LogEntry(i, term, f"cmd-{i}".encode()) for i in range(first, last + 1)]


def opened(path: Path, **kwargs) -> tuple[RaftStorage, tuple[HardState, Snapshot | None, list[LogEntry]]]:
    storage = RaftStorage(path, **kwargs)
    return storage, storage.load()


def reload(path: Path, **kwargs) -> tuple[HardState, Snapshot | None, list[LogEntry]]:
    storage, loaded = opened(path, **kwargs)
    storage.close()
    return loaded


def segment_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith("wal-"))


def test_empty_directory_loads_empty_state(tmp_path: Path) -> None:
    assert reload(tmp_path / "state") == (HardState(), None, [])


def test_append_and_hard_state_round_trip(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 3))
    storage.append(entries(4, 10, term=2))
    storage.append([LogEntry(11, 2, b"")])  # empty data is storable
    storage.save_hard_state(HardState(term=2, voted_for=7))
    storage.close()

    hard_state, snapshot, loaded = reload(tmp_path)
    assert hard_state == HardState(term=2, voted_for=7)
    assert snapshot is None
    assert loaded == entries(1, 3) + entries(4, 10, term=2) + [LogEntry(11, 2, b"")]


def test_append_must_continue_the_log(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 2, term=3))
    with pytest.raises(ValueError, match="does not follow last index 2"):
        storage.append(entries(4, 4, term=3))
    with pytest.raises(ValueError, match="term 2 < previous term 3"):
        storage.append(entries(3, 3, term=2))
    storage.close()
    assert reload(tmp_path)[2] == entries(1, 2, term=3)


def test_operations_before_load_are_refused(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    with pytest.raises(StorageError, match=r"load\(\) must be called first"):
        storage.append(entries(1, 1))
    storage.close()


def test_directory_is_locked_while_open(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    with pytest.raises(StorageError, match="in use by another process"):
        RaftStorage(tmp_path, lock_wait_secs=0.1)
    storage.close()
    reload(tmp_path)  # free again


def test_a_lock_released_a_moment_later_is_waited_for(tmp_path: Path) -> None:
    # As a killed member's forked snapshot child holds it until it closes its inherited descriptors.
    import threading

    holder, _ = opened(tmp_path)
    release = threading.Timer(0.2, holder.close)
    release.start()
    try:
        storage = RaftStorage(tmp_path, lock_wait_secs=10)
    finally:
        release.join()
    storage.load()
    storage.close()


def test_segments_rotate_and_reload(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path, segment_bytes=100)
    for i in range(1, 21):
        storage.append(entries(i, i))
    storage.close()
    assert len(segment_files(tmp_path)) > 3
    assert reload(tmp_path)[2] == entries(1, 20)


def write_log(path: Path, last: int, **kwargs) -> None:
    storage, _ = opened(path, **kwargs)
    for i in range(1, last + 1):
        storage.append(entries(i, i))
    storage.close()


def test_partial_last_record_is_discarded(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    seg = tmp_path / segment_name(1)
    good_size = seg.stat().st_size
    with seg.open("ab") as f:  # a crash in the middle of writing entry 6
        f.write(codec.encode_record(6, 1, b"x" * 100)[:60])

    storage, (_, _, loaded) = opened(tmp_path)
    assert loaded == entries(1, 5)
    assert seg.stat().st_size == good_size  # the torn bytes are gone from the file
    storage.append(entries(6, 6))
    storage.close()
    assert reload(tmp_path)[2] == entries(1, 6)


@pytest.mark.parametrize(
    "tail",
    [
        b"\x93\x17garbage that is not a record at all" * 3,
        b"\x00" * 4096,  # file extended but its pages never written
        codec.encode_record(6, 1, b"y" * 50)[:-1] + b"z",  # complete-looking last record, bad checksum
    ],
    ids=["garbage", "zero-filled", "bad-checksum-last"],
)
def test_torn_tail_variants_are_discarded(tmp_path: Path, tail: bytes) -> None:
    write_log(tmp_path, 5)
    with (tmp_path / segment_name(1)).open("ab") as f:
        f.write(tail)
    assert reload(tmp_path)[2] == entries(1, 5)


def test_corrupt_record_in_the_middle_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    seg = tmp_path / segment_name(1)
    record_size = len(codec.encode_record(1, 1, b"cmd-1"))
    raw = bytearray(seg.read_bytes())
    raw[record_size + 20] ^= 0x55  # inside entry 2's data
    seg.write_bytes(bytes(raw))

    storage = RaftStorage(tmp_path)
    with pytest.raises(
        CorruptLogError, match=rf"{seg.name} at offset {record_size}: checksum mismatch"
    ) as info:
        storage.load()
    assert info.value.path == seg
    assert info.value.offset == record_size
    storage.close()
    assert seg.read_bytes() == bytes(raw)  # nothing was "repaired" away


def test_torn_tail_in_an_earlier_segment_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path, 10, segment_bytes=100)
    first = tmp_path / segment_files(tmp_path)[0]
    with first.open("r+b") as f:
        f.truncate(first.stat().st_size - 3)
    storage = RaftStorage(tmp_path)
    with pytest.raises(CorruptLogError, match=first.name):
        storage.load()
    storage.close()


def test_missing_middle_segment_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path, 10, segment_bytes=100)
    names = segment_files(tmp_path)
    (tmp_path / names[1]).unlink()
    storage = RaftStorage(tmp_path)
    with pytest.raises(CorruptLogError, match="but .* ends at"):
        storage.load()
    storage.close()


def test_corrupt_hard_state_is_an_error(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.save_hard_state(HardState(5, 1))
    storage.close()
    path = tmp_path / "hardstate"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    storage = RaftStorage(tmp_path)
    with pytest.raises(CorruptLogError, match="hardstate: checksum mismatch"):
        storage.load()
    storage.close()


def test_truncate_from_within_and_across_segments(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path, segment_bytes=100)
    for i in range(1, 21):
        storage.append(entries(i, i))
    storage.truncate_from(15)
    storage.append(entries(15, 16, term=2))
    storage.truncate_from(7)
    storage.append(entries(7, 9, term=3))
    storage.truncate_from(100)  # past the end: nothing to drop
    storage.close()
    assert reload(tmp_path, segment_bytes=100)[2] == entries(1, 6) + entries(7, 9, term=3)


def test_truncate_everything(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 5))
    storage.truncate_from(1)
    storage.append(entries(1, 2, term=4))
    storage.close()
    assert reload(tmp_path)[2] == entries(1, 2, term=4)


def test_snapshot_compacts_and_keeps_later_entries(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path, segment_bytes=100)
    for i in range(1, 21):
        storage.append(entries(i, i))
    storage.save_snapshot(Snapshot(14, 1, b"state@14"))
    with pytest.raises(ValueError, match="compacted"):
        storage.truncate_from(14)
    storage.append(entries(21, 22))
    storage.close()

    first_indexes = [int(name[4:24]) for name in segment_files(tmp_path)]
    assert min(first_indexes) == 15  # nothing at or below the snapshot is left on disk
    _, snapshot, loaded = reload(tmp_path, segment_bytes=100)
    assert snapshot == Snapshot(14, 1, b"state@14")
    assert loaded == entries(15, 22)


def test_snapshot_at_last_index_empties_the_log(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 5))
    storage.save_snapshot(Snapshot(5, 1, b"s5"))
    assert segment_files(tmp_path) == []
    storage.append(entries(6, 6))
    storage.close()
    assert reload(tmp_path)[1:] == (Snapshot(5, 1, b"s5"), entries(6, 6))


@pytest.mark.parametrize("snap", [Snapshot(8, 1, b"past the end"), Snapshot(3, 9, b"other term")])
def test_snapshot_that_does_not_match_the_log_replaces_it(tmp_path: Path, snap: Snapshot) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 5))
    storage.save_snapshot(snap)
    with pytest.raises(ValueError, match=f"does not follow last index {snap.last_index}"):
        storage.append(entries(6, 6, term=9))  # where the old log ended
    storage.append(entries(snap.last_index + 1, snap.last_index + 1, term=9))
    storage.close()
    assert reload(tmp_path)[1:] == (snap, entries(snap.last_index + 1, snap.last_index + 1, term=9))


def test_older_snapshot_is_refused(tmp_path: Path) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 5))
    storage.save_snapshot(Snapshot(4, 1, b"s4"))
    with pytest.raises(ValueError, match="older than the stored one at 4"):
        storage.save_snapshot(Snapshot(3, 1, b"s3"))
    storage.close()


def test_crash_during_compaction_recovers(tmp_path: Path) -> None:
    """Old segments left behind by an interrupted compaction are recognised as obsolete."""
    state = tmp_path / "state"
    storage, _ = opened(state, segment_bytes=100)
    for i in range(1, 21):
        storage.append(entries(i, i))
    before = tmp_path / "before"
    shutil.copytree(state, before, ignore=shutil.ignore_patterns("LOCK"))
    storage.save_snapshot(Snapshot(14, 1, b"s14"))
    storage.close()
    # Put back every pre-compaction segment, as if the crash came right after the new snapshot and the
    # rewritten tail segment were durable but before any old segment was unlinked.
    for seg in before.iterdir():
        if not (state / seg.name).exists():
            shutil.copy(seg, state / seg.name)
    (state / (segment_name(15) + ".tmp")).write_bytes(b"half-written rewrite")

    _, snapshot, loaded = reload(state, segment_bytes=100)
    assert snapshot == Snapshot(14, 1, b"s14")
    assert loaded == entries(15, 20)
    assert min(int(name[4:24]) for name in segment_files(state)) == 15
    assert not list(state.glob("*.tmp"))


def enospc(*args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_fsync_failure_leaves_the_log_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 3))
    size = (tmp_path / segment_name(1)).stat().st_size

    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(StorageError, match="appending log entries 4..5 .* No space left on device"):
        storage.append(entries(4, 5))
    assert storage.last_index == 3
    # Cut back at once (not only before the next write), so a crash now cannot resurrect entries 4..5.
    assert (tmp_path / segment_name(1)).stat().st_size == size
    monkeypatch.undo()  # the disk recovers

    storage.append(entries(4, 4, term=2))
    storage.close()
    assert reload(tmp_path)[2] == entries(1, 3) + entries(4, 4, term=2)
    assert (tmp_path / segment_name(1)).stat().st_size == size + len(codec.encode_record(4, 2, b"cmd-4"))


def test_short_write_then_enospc_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, _ = opened(tmp_path)
    storage.append(entries(1, 3))
    real_write = os.write
    calls = []

    def half_then_enospc(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        enospc()
        return 0

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(StorageError, match="No space left"):
        storage.append(entries(4, 8))
    monkeypatch.undo()
    storage.append(entries(4, 5))
    storage.close()
    assert reload(tmp_path)[2] == entries(1, 5)


def test_hard_state_write_failure_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, _ = opened(tmp_path)
    storage.save_hard_state(HardState(3, 1))
    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(StorageError, match="saving hard state"):
        storage.save_hard_state(HardState(4, 1))
    monkeypatch.undo()
    storage.close()
    assert reload(tmp_path)[0] == HardState(3, 1)
    assert not list(tmp_path.glob("*.tmp"))


def test_fsync_disabled_never_calls_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", enospc)
    storage, _ = opened(tmp_path, fsync=False)
    storage.append(entries(1, 3))
    storage.save_hard_state(HardState(1, 1))
    storage.save_snapshot(Snapshot(2, 1, b"s"))
    storage.close()
    monkeypatch.undo()
    assert reload(tmp_path) == (HardState(1, 1), Snapshot(2, 1, b"s"), entries(3, 3))
