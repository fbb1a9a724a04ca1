"""Accounting entities (clusters, accounts, users, associations, QOS) and their limits (pure data).

Integers use ``-1`` for "no limit set" (Slurm prints those as blank). TRES limits are dicts of
TRES key -> count (memory in MiB), see :mod:`spur.accounting.tres`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spur.accounting.tres import TresError, format_tres, merge_tres, parse_tres
from spur.core.timespec import TimeSpecError, format_time_limit, parse_duration_secs

UNSET = -1
ADMIN_LEVELS = ("None", "Operator", "Administrator")
ROOT = "root"


class AcctError(ValueError):
    """A request the accounting model refuses; ``message`` is printed as Slurm would."""

    def __init__(self, message: str, code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class Limits:
    """Limits of an association or QOS (``-1``/empty = not set)."""

    grp_tres: dict[str, int] = field(default_factory=dict)
    grp_jobs: int = UNSET
    grp_submit: int = UNSET
    max_jobs: int = UNSET
    max_submit: int = UNSET
    max_wall: int = UNSET  # seconds
    max_tres_per_job: dict[str, int] = field(default_factory=dict)
    max_tres_per_user: dict[str, int] = field(default_factory=dict)


# sacctmgr option name (lower case) -> Limits attribute. Aliases as sacctmgr accepts them.
LIMIT_OPTIONS: dict[str, str] = {
    "grptres": "grp_tres",
    "grpjobs": "grp_jobs",
    "grpsubmit": "grp_submit",
    "grpsubmitjobs": "grp_submit",
    "maxjobs": "max_jobs",
    "maxjobsperuser": "max_jobs",
    "maxjobspu": "max_jobs",
    "maxsubmit": "max_submit",
    "maxsubmitjobs": "max_submit",
    "maxsubmitjobsperuser": "max_submit",
    "maxsubmitpu": "max_submit",
    "maxwall": "max_wall",
    "maxwalldurationperjob": "max_wall",
    "maxtres": "max_tres_per_job",
    "maxtresperjob": "max_tres_per_job",
    "maxtresperuser": "max_tres_per_user",
    "maxtrespu": "max_tres_per_user",
}
# Limits attribute -> the name Slurm prints in "Settings" blocks.
LIMIT_TITLES: dict[str, str] = {
    "grp_tres": "GrpTRES",
    "grp_jobs": "GrpJobs",
    "grp_submit": "GrpSubmitJobs",
    "max_jobs": "MaxJobs",
    "max_submit": "MaxSubmitJobs",
    "max_wall": "MaxWall",
    "max_tres_per_job": "MaxTRESPerJob",
    "max_tres_per_user": "MaxTRESPerUser",
}
_TRES_LIMITS = frozenset({"grp_tres", "max_tres_per_job", "max_tres_per_user"})


def parse_limit(attr: str, option: str, raw: str) -> int | dict[str, int]:
    """One limit value from sacctmgr text; ``-1`` clears. Raises :class:`AcctError`."""
    raw = raw.strip()
    if attr in _TRES_LIMITS:
        try:
            return parse_tres(raw)
        except TresError as exc:
            raise AcctError(f"sacctmgr: error: {exc}") from None
    if raw == "-1" or (attr == "max_wall" and raw.lower() in ("unlimited", "infinite")):
        return UNSET
    if attr == "max_wall":
        try:
            return parse_duration_secs(raw)
        except TimeSpecError:
            raise AcctError(f"sacctmgr: error: Invalid value {raw!r} for {option}: expected a time") from None
    if not raw.isdigit():
        raise AcctError(f"sacctmgr: error: Invalid value {raw!r} for {option}: expected a whole number or -1")
    return int(raw)


def apply_limit(limits: Limits, attr: str, value: int | dict[str, int]) -> None:
    """Set (or for -1 clear) one parsed limit on ``limits``."""
    if isinstance(value, dict):
        setattr(limits, attr, merge_tres(getattr(limits, attr), value))
    else:
        setattr(limits, attr, value)


def format_limit(limits: Limits, attr: str) -> str:
    """A limit as sacctmgr prints it (blank when unset)."""
    value = getattr(limits, attr)
    if isinstance(value, dict):
        return format_tres(value)
    if value == UNSET:
        return ""
    if attr == "max_wall":
        return format_time_limit(value)
    return str(value)


@dataclass
class Cluster:
    name: str
    control_host: str = ""
    control_port: int = 0


@dataclass
class Account:
    name: str
    description: str = ""
    organization: str = ""
    parent: str = ""  # "" only for root


@dataclass
class User:
    name: str
    default_account: str = ""
    admin_level: str = "None"


@dataclass
class Association:
    """An account's own association (``user == ""``) or a user's association in an account."""

    account: str
    user: str = ""
    partition: str = ""
    shares: int = 1
    limits: Limits = field(default_factory=Limits)
    qos: list[str] = field(default_factory=list)  # empty = inherited (root: ["normal"])
    default_qos: str = ""
    # Decayed usage (CPU-seconds) as of ``usage_time``; see spur.accounting.fairshare.
    usage: float = 0.0
    usage_time: float = 0.0

    @property
    def key(self) -> str:
        return assoc_key(self.account, self.user, self.partition)


def assoc_key(account: str, user: str = "", partition: str = "") -> str:
    """Key of an association in the domain's table: ``account|user|partition``."""
    return f"{account}|{user}|{partition}"


@dataclass
class Qos:
    name: str
    description: str = ""
    priority: int = 0
    limits: Limits = field(default_factory=Limits)
    preempt: list[str] = field(default_factory=list)
    preempt_mode: str = "cluster"
    usage_factor: float = 1.0
    grace_time: int = 0
    flags: list[str] = field(default_factory=list)
