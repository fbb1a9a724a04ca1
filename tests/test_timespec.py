"""Time limits, elapsed/limit formatting, --begin parsing and timestamps."""

from __future__ import annotations

import csv
import re
from datetime import datetime
from pathlib import Path

import pytest

from spur.core.timespec import (
    UNLIMITED,
    TimeSpecError,
    format_elapsed,
    format_hms,
    format_time_limit,
    format_timestamp,
    parse_begin_time,
    parse_duration_secs,
    parse_time_limit,
)

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


def _reference(name: str) -> Path:
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"reference data {path} not present")
    return path


def test_reference_timespec_rows_all_match_squeue() -> None:
    with _reference("timespec.tsv").open(newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    assert rows
    for spec, shown in rows:
        assert format_time_limit(parse_time_limit(spec)) == shown, spec


def _section(text: str, title: str) -> list[str]:
    lines = text.split("\n")
    start = lines.index(f"## {title}") + 1
    out = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        out.append(line)
    return out


def test_squeue_and_scontrol_reference_times_round_trip() -> None:
    text = _reference("slurm-22.05-outputs.txt").read_text()
    rows = [line.split("|") for line in _section(text, "squeue -o '%i|%j|%t|%T|%M|%l|%D|%R|%A|%a|%r|%C'")]
    header, body = rows[0], [r for r in rows[1:] if len(r) > 1]
    elapsed_col, limit_col = header.index("TIME"), header.index("TIME_LIMIT")
    limits = {r[limit_col] for r in body}
    assert {"UNLIMITED", "1-00:00:00", "10:00"} <= limits
    for shown in limits:
        assert format_time_limit(parse_time_limit(shown)) == shown
    for r in body:
        assert format_elapsed(parse_duration_secs(r[elapsed_col])) == r[elapsed_col]
    show_job = "\n".join(_section(text, "scontrol show job 217"))
    assert "RunTime=" + format_hms(0) in show_job
    assert "TimeLimit=" + format_hms(parse_time_limit("1-0")) in show_job
    assert "EligibleTime=" + format_timestamp(0) in show_job
    submit = re.search(r"SubmitTime=(\S+)", show_job)
    assert submit is not None
    ts = datetime.strptime(submit.group(1), "%Y-%m-%dT%H:%M:%S").timestamp()
    assert format_timestamp(ts) == submit.group(1)


@pytest.mark.parametrize(
    ("spec", "secs"),
    [
        ("1", 60),
        ("0:59", 60),
        ("0:60", 60),
        ("1:01", 120),
        ("10:00:00", 36000),
        ("1-0", 86400),
        ("1-", 86400),
        ("0-0:0:1", 60),
        ("unlimited", UNLIMITED),
        ("Infinite", UNLIMITED),
        ("-1", UNLIMITED),
        ("0:0", UNLIMITED),
        (" 5 ", 300),
    ],
)
def test_parse_time_limit_rounds_up_to_minutes(spec: str, secs: int) -> None:
    assert parse_time_limit(spec) == secs


@pytest.mark.parametrize(
    "spec",
    ["", "abc", "1:2:3:4", "1-2-3", "1:2-3", "-5", "5m", "1.5", ":", "1-:", "99999999999999999999", "1e3"],
)
def test_malformed_time_limits_raise_naming_the_spec(spec: str) -> None:
    with pytest.raises(TimeSpecError) as exc:
        parse_time_limit(spec)
    assert repr(spec) in str(exc.value)


def test_absurd_time_limit_is_rejected_not_overflowed() -> None:
    with pytest.raises(TimeSpecError):
        parse_time_limit("99999999999-0")
    assert parse_time_limit("36500-0") == 36500 * 86400


@pytest.mark.parametrize(
    ("secs", "limit", "elapsed", "hms"),
    [
        (0, "0:00", "0:00", "00:00:00"),
        (3, "0:03", "0:03", "00:00:03"),
        (300, "5:00", "5:00", "00:05:00"),
        (3723, "1:02:03", "1:02:03", "01:02:03"),
        (5400, "1:30:00", "1:30:00", "01:30:00"),
        (86400, "1-00:00:00", "1-00:00:00", "1-00:00:00"),
        (11 * 86400 + 5, "11-00:00:05", "11-00:00:05", "11-00:00:05"),
    ],
)
def test_formatters(secs: int, limit: str, elapsed: str, hms: str) -> None:
    assert format_time_limit(secs) == limit
    assert format_elapsed(secs) == elapsed
    assert format_hms(secs) == hms


def test_unlimited_and_negative_formatting() -> None:
    assert format_time_limit(UNLIMITED) == "UNLIMITED"
    assert format_hms(UNLIMITED) == "UNLIMITED"
    assert format_elapsed(-5) == "0:00"
    assert format_elapsed(3.9) == "0:03"


def test_format_timestamp_is_local_time_and_unknown_for_zero() -> None:
    ts = datetime(2026, 12, 2, 12, 37, 53).timestamp()
    assert format_timestamp(ts) == "2026-12-02T12:37:53"
    assert format_timestamp(0) == "Unknown"


# A fixed local "now": Wednesday 2026-12-02 12:37:53 (no DST change nearby in common zones).
NOW = datetime(2026, 12, 2, 12, 37, 53).timestamp()


def _local(*args: int) -> float:
    return datetime(*args).timestamp()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("now", NOW),
        ("now+60", NOW + 60),
        ("now+1hour", NOW + 3600),
        ("now + 2 days", NOW + 2 * 86400),
        ("now+1week", NOW + 7 * 86400),
        ("now-10minutes", NOW - 600),
        ("16:00", _local(2026, 12, 2, 16, 0)),
        ("10:00", _local(2026, 12, 3, 10, 0)),  # already past today -> tomorrow
        ("12:37", _local(2026, 12, 3, 12, 37)),  # the current minute counts as past
        ("16:30:15", _local(2026, 12, 2, 16, 30, 15)),
        ("4:00 PM", _local(2026, 12, 2, 16, 0)),
        ("12:00am", _local(2026, 12, 3, 0, 0)),
        ("midnight", _local(2026, 12, 3, 0, 0)),
        ("noon", _local(2026, 12, 3, 12, 0)),
        ("teatime", _local(2026, 12, 2, 16, 0)),
        ("fika", _local(2026, 12, 2, 15, 0)),
        ("tomorrow", _local(2026, 12, 3, 0, 0)),
        ("today", _local(2026, 12, 2, 0, 0)),
        ("noon tomorrow", _local(2026, 12, 3, 12, 0)),
        ("2027-01-15", _local(2027, 1, 15)),
        ("2027-01-15T08:30", _local(2027, 1, 15, 8, 30)),
        ("2027-01-15T08:30:05", _local(2027, 1, 15, 8, 30, 5)),
        ("12/25", _local(2026, 12, 25)),
        ("01/05", _local(2027, 1, 5)),  # a date without a year is the next such date
        ("1225", _local(2026, 12, 25)),
        ("12/25/27", _local(2027, 12, 25)),
        ("12.25.27", _local(2027, 12, 25)),
        ("12/25-10:00", _local(2026, 12, 25, 10, 0)),
        ("uts1800000000", 1800000000.0),
    ],
)
def test_parse_begin_time(spec: str, expected: float) -> None:
    assert parse_begin_time(spec, NOW) == pytest.approx(int(expected))


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "yesterday",
        "now+",
        "now+5fortnights",
        "now*2",
        "25:00",
        "12:60",
        "13/01",
        "2027-13-01",
        "2027-02-30",
        "uts12",
        "13:00pm",
        "now+99999999999999999weeks",
    ],
)
def test_bad_begin_times_raise_naming_the_spec(spec: str) -> None:
    with pytest.raises(TimeSpecError) as exc:
        parse_begin_time(spec, NOW)
    assert repr(spec) in str(exc.value)


def test_slurm_time_format_selects_the_display(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from spur.core.timespec import STANDARD_TIME_FORMAT, relative_time_format, time_format

    assert time_format(None) == time_format("") == time_format("standard") == STANDARD_TIME_FORMAT
    assert time_format("%s") == "%s"
    assert time_format("no percent") == STANDARD_TIME_FORMAT  # Slurm ignores a value without a %
    assert time_format("%Y" * 20) == STANDARD_TIME_FORMAT  # ... and one too long for its buffer
    ts = datetime(2026, 3, 4, 5, 6, 7).timestamp()
    monkeypatch.setenv("SLURM_TIME_FORMAT", "%s")
    assert format_timestamp(ts) == str(int(ts))
    monkeypatch.setenv("SLURM_TIME_FORMAT", "%Y/%m")
    assert format_timestamp(ts) == "2026/03"
    assert format_timestamp(0) == "Unknown"

    def day(y: int, m: int, d: int) -> time.struct_time:
        return datetime(y, m, d, 12).timetuple()

    today = day(2026, 3, 4)
    assert relative_time_format(day(2026, 3, 4), today) == "%H:%M:%S"
    assert relative_time_format(day(2026, 3, 3), today) == "Ystday %H:%M"
    assert relative_time_format(day(2026, 3, 5), today) == "Tomorr %H:%M"
    assert relative_time_format(day(2026, 3, 9), today) == "%a %H:%M"
    assert relative_time_format(day(2026, 2, 20), today) == "%-d %b %H:%M"
    assert relative_time_format(day(2024, 3, 4), today) == "%-d %b %Y"
