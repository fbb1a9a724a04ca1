"""Slurm time specifications: job time limits, elapsed times, --begin times and timestamps.

Time limits are seconds, with :data:`UNLIMITED` (-1) for no limit. Parsing follows Slurm's
``time_str2mins``: the value is rounded *up* to whole minutes (stored here as seconds), and a limit of
zero minutes means no limit, exactly as squeue then shows ``UNLIMITED``.
"""

from __future__ import annotations

import os as _os
import re
import time as _time

from spur.core.units import UNLIMITED

__all__ = [
    "UNLIMITED",
    "TimeSpecError",
    "parse_time_limit",
    "parse_duration_secs",
    "format_time_limit",
    "format_elapsed",
    "format_hms",
    "parse_begin_time",
    "format_timestamp",
]

# Anything beyond a century is a typo, not a wish; rejecting it keeps every value a small int.
MAX_LIMIT_SECS = 100 * 365 * 86400

_UNLIMITED_WORDS = frozenset({"-1", "infinite", "unlimited"})
_TIMESPEC_CHARS = re.compile(r"^[0-9:\-]+$")


class TimeSpecError(ValueError):
    """A malformed or absurd time specification; the message names the spec."""


def _is_valid_timespec(s: str) -> bool:
    """Slurm's ``_is_valid_timespec``: digits, at most one '-', at most two ':' (none before '-')."""
    if not _TIMESPEC_CHARS.match(s):
        return False
    groups = [g for g in re.split(r"[-:]", s) if g]
    dash, colon = s.count("-"), s.count(":")
    if not groups or dash > 1 or colon > 2:
        return False
    if dash and ":" in s.split("-", 1)[0]:
        return False
    digit = len(groups)
    if dash:
        return not ((colon == 1 and digit < 3) or (colon == 2 and digit < 4))
    return not ((colon == 1 and digit < 2) or (colon == 2 and digit < 3))


def parse_duration_secs(spec: str) -> int:
    """Parse ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` into seconds.

    No rounding. Returns :data:`UNLIMITED` for ``-1``/``INFINITE``/``UNLIMITED`` (any case).
    Raises :class:`TimeSpecError` for anything else or values beyond 100 years.
    """
    s = spec.strip()
    if s.lower() in _UNLIMITED_WORDS:
        return UNLIMITED
    if not s or not _is_valid_timespec(s):
        raise TimeSpecError(f"Invalid time specification: {spec!r}")
    if len(s) > 40:
        raise TimeSpecError(f"Time specification too large: {spec!r}")
    d = h = m = sec = 0
    if "-" in s:
        days, _, rest = s.partition("-")
        if not days:
            raise TimeSpecError(f"Invalid time specification: {spec!r}")
        d = int(days)
        fields = [int(x or 0) for x in rest.split(":")] if rest else []
        fields += [0] * (3 - len(fields))
        h, m, sec = fields
    else:
        fields = [int(x or 0) for x in s.split(":")]
        if len(fields) == 3:
            h, m, sec = fields
        elif len(fields) == 2:
            m, sec = fields
        else:
            (m,) = fields
    total = ((d * 24 + h) * 60 + m) * 60 + sec
    if total > MAX_LIMIT_SECS:
        raise TimeSpecError(f"Time specification too large: {spec!r}")
    return total


def parse_time_limit(spec: str) -> int:
    """Parse a job time limit (``--time``) into seconds, rounded up to whole minutes.

    ``UNLIMITED``/``INFINITE``/``-1`` and any value that rounds to zero minutes return
    :data:`UNLIMITED`. Raises :class:`TimeSpecError` naming the spec on malformed input.
    """
    secs = parse_duration_secs(spec)
    if secs == UNLIMITED:
        return UNLIMITED
    minutes = (secs + 59) // 60
    return UNLIMITED if minutes == 0 else minutes * 60


def _squeue_secs(secs: int) -> str:
    days, rem = divmod(secs, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{seconds:02d}"
    return f"{minutes}:{seconds:02d}"


def format_time_limit(secs: int) -> str:
    """A time limit as squeue's ``%l`` shows it: ``5:00``, ``1:30:00``, ``1-00:00:00``, ``UNLIMITED``."""
    if secs is None or secs < 0:
        return "UNLIMITED"
    return _squeue_secs(int(secs))


def format_elapsed(secs: int | float) -> str:
    """An elapsed run time as squeue's ``%M`` shows it: ``0:03``, ``1:02:03``, ``1-00:00:00``.

    Negative values (clock skew) show as ``0:00``; fractions are truncated.
    """
    return _squeue_secs(max(0, int(secs)))


def format_hms(secs: int | float) -> str:
    """``HH:MM:SS`` or ``D-HH:MM:SS`` as scontrol shows RunTime/TimeLimit and sacct Elapsed.

    :data:`UNLIMITED` (or any negative value) shows as ``UNLIMITED``.
    """
    secs = int(secs)
    if secs < 0:
        return "UNLIMITED"
    days, rem = divmod(secs, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


STANDARD_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def time_format(setting: str | None) -> str:
    """The display format a ``SLURM_TIME_FORMAT`` value selects, as Slurm's commands read it. Pure.

    Unset, empty or ``standard``: ISO (``2026-12-02T12:37:53``); ``relative``: the marker
    ``"relative"`` (see :func:`relative_time_format`); any other value holding a ``%`` and under 32
    characters is a strftime format; anything else falls back to the standard one.
    """
    if not setting or setting == "standard":
        return STANDARD_TIME_FORMAT
    if setting == "relative":
        return "relative"
    if "%" not in setting or len(setting) >= 32:
        return STANDARD_TIME_FORMAT
    return setting


def relative_time_format(when: _time.struct_time, today: _time.struct_time) -> str:
    """The strftime format ``SLURM_TIME_FORMAT=relative`` uses for ``when`` seen on ``today``. Pure.

    Same day: ``%H:%M:%S``; the day before or after: ``Ystday %H:%M`` / ``Tomorr %H:%M``; up to six days
    ahead: ``%a %H:%M``; within a year: ``%-d %b %H:%M``; further: ``%-d %b %Y``.
    """
    distance = (1000 * when.tm_year + when.tm_yday) - (1000 * today.tm_year + today.tm_yday)
    if distance == -1:
        return "Ystday %H:%M"
    if distance == 0:
        return "%H:%M:%S"
    if distance == 1:
        return "Tomorr %H:%M"
    if distance < -365 or distance > 365:
        return "%-d %b %Y"
    if distance < -1 or distance > 6:
        return "%-d %b %H:%M"
    return "%a %H:%M"


def format_timestamp(ts: float, fmt: str | None = None) -> str:
    """A unix time as Slurm prints it (local time); 0 or less is ``Unknown``.

    ``fmt`` is a :func:`time_format` result; by default the one ``SLURM_TIME_FORMAT`` in this
    process's environment selects (``2026-12-02T12:37:53`` when it is unset).
    """
    if not ts or ts <= 0:
        return "Unknown"
    if fmt is None:
        fmt = time_format(_os.environ.get("SLURM_TIME_FORMAT"))
    when = _time.localtime(ts)
    if fmt == "relative":
        fmt = relative_time_format(when, _time.localtime())
    return _time.strftime(fmt, when)


# ---- --begin -------------------------------------------------------------------------------------

_UNITS = (
    ("seconds", 1),
    ("second", 1),
    ("minutes", 60),
    ("minute", 60),
    ("hours", 3600),
    ("hour", 3600),
    ("days", 86400),
    ("day", 86400),
    ("weeks", 604800),
    ("week", 604800),
)
_WORD_TIMES = {"midnight": 0, "noon": 12, "fika": 15, "teatime": 16}
_MAX_DELTA = 100 * 365 * 86400
_MAX_DELTA_DIGITS = 12


def _begin_error(spec: str) -> TimeSpecError:
    return TimeSpecError(f"Invalid time specification: {spec!r}")


def _parse_delta(s: str, spec: str) -> int:
    """``count[unit]`` after ``now+``/``now-``; blanks ignored, unit defaults to seconds."""
    s = "".join(s.split()).lower()
    m = re.fullmatch(r"(\d+)([a-z]*)", s)
    if not m or len(m.group(1)) > _MAX_DELTA_DIGITS:
        raise _begin_error(spec)
    count, unit = int(m.group(1)), m.group(2)
    mult = 1
    if unit:
        for name, factor in _UNITS:
            if unit == name:
                mult = factor
                break
        else:
            raise _begin_error(spec)
    delta = count * mult
    if delta > _MAX_DELTA:
        raise _begin_error(spec)
    return delta


_TIME_RE = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?", re.IGNORECASE)
_ISO_DATE_RE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_US_DATE_RE = re.compile(r"(\d{1,2})[./]?(\d{1,2})(?:[./]?(\d{2}))?")


def parse_begin_time(spec: str, now: float, *, past: bool = False) -> float:
    """Parse a ``--begin`` value into a unix time, relative to ``now`` in local time (Slurm's parse_time).

    Accepts ``now[{+|-}count[seconds|minutes|hours|days|weeks]]``, ``HH:MM[:SS] [AM|PM]``,
    ``YYYY-MM-DD[THH:MM[:SS]]``, ``MMDD[YY]``, ``MM/DD[/YY]`` and ``MM.DD[.YY]`` (optionally
    ``-HH:MM[:SS]``), ``midnight``, ``noon``, ``fika`` (15:00), ``teatime`` (16:00), ``today``,
    ``tomorrow`` and ``uts<unix seconds>``. A time without a date means the next such time; a date
    without a year means the next such date. Raises :class:`TimeSpecError` naming the spec.
    """
    s = spec.strip()
    if not s:
        raise _begin_error(spec)
    low = s.lower()
    if low.startswith("uts"):
        digits = s[3:]
        if not digits.isdigit() or len(digits) > 12 or int(digits) < 1_000_000:
            raise _begin_error(spec)
        return float(int(digits))

    from datetime import datetime, timedelta

    now_dt = datetime.fromtimestamp(now)
    hour = minute = -1
    second = 0
    date: tuple[int, int, int | None] | None = None  # (month, mday, year-or-None)
    year: int | None
    pos = 0
    n = len(s)
    while pos < n:
        ch = s[pos]
        rest = low[pos:]
        if ch in " \t-T":
            pos += 1
            continue
        if rest.startswith("today"):
            date = (now_dt.month, now_dt.day, now_dt.year)
            pos += 5
            continue
        if rest.startswith("tomorrow"):
            t = now_dt + timedelta(days=1)
            date = (t.month, t.day, t.year)
            pos += 8
            continue
        word = next((w for w in _WORD_TIMES if rest.startswith(w)), None)
        if word is not None:
            hour, minute, second = _WORD_TIMES[word], 0, 0
            pos += len(word)
            continue
        if rest.startswith("now"):
            tail = s[pos + 3 :].strip()
            delta = 0
            if tail:
                if tail[0] not in "+-":
                    raise _begin_error(spec)
                delta = _parse_delta(tail[1:], spec)
                if tail[0] == "-":
                    delta = -delta
            return float(int(now) + delta)
        if not ch.isdigit():
            raise _begin_error(spec)
        if (pos + 1 < n and s[pos + 1] == ":") or (pos + 2 < n and s[pos + 2] == ":"):
            m = _TIME_RE.match(s, pos)
            if not m:
                raise _begin_error(spec)
            hour, minute = int(m.group(1)), int(m.group(2))
            second = int(m.group(3) or 0)
            if hour > 23 or minute > 59 or second > 59:
                raise _begin_error(spec)
            ampm = (m.group(4) or "").lower()
            if ampm == "pm":
                hour = 12 if hour == 12 else hour + 12
                if hour > 23:
                    raise _begin_error(spec)
            elif ampm == "am":
                if hour > 12:
                    raise _begin_error(spec)
                if hour == 12:
                    hour = 0
            pos = m.end()
            continue
        m = _ISO_DATE_RE.match(s, pos)
        if m:
            year, mon, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if not (1 <= mon <= 12 and 1 <= day <= 31):
                raise _begin_error(spec)
            date = (mon, day, year)
            pos = m.end()
            continue
        m = _US_DATE_RE.match(s, pos)
        if not m:
            raise _begin_error(spec)
        mon, day = int(m.group(1)), int(m.group(2))
        if not (1 <= mon <= 12 and 1 <= day <= 31):
            raise _begin_error(spec)
        date = (mon, day, 2000 + int(m.group(3)) if m.group(3) else None)
        pos = m.end()
        # Slurm consumes one optional separator after the date.
        if pos < n and s[pos] in "./":
            pos += 1

    if hour == -1 and date is None:
        raise _begin_error(spec)
    if hour == -1:
        hour, minute, second = 0, 0, 0
    if date is None:
        if past or (hour, minute) > (now_dt.hour, now_dt.minute):
            date = (now_dt.month, now_dt.day, now_dt.year)
        else:
            t = now_dt + timedelta(days=1)
            date = (t.month, t.day, t.year)
    mon, day, year = date
    if year is None:
        later = (mon, day, hour, minute) > (now_dt.month, now_dt.day, now_dt.hour, now_dt.minute)
        if past:
            year = now_dt.year - 1 if later else now_dt.year
        else:
            year = now_dt.year if later else now_dt.year + 1
    try:
        result = datetime(year, mon, day, hour, minute, second)
    except ValueError:
        raise _begin_error(spec) from None
    return float(int(result.timestamp()))
