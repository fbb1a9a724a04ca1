"""slurmdb records <-> the Accounting service's messages, as pure functions (no I/O).

The ``spur.v1.Accounting`` service answers ``Show`` with sacctmgr's rows (lower-case format field
name -> printed value, see :meth:`spur.state.accounting.AccountingDomain.records`) and takes
``Change`` requests in sacctmgr's words (op, entity, names, where, values). This module turns rows
into :mod:`spur.rest.slurmdb` records and records into the ``values``/``where`` of a Change.
It decides nothing: every rule (who may change what, valid names, limits, deletability) is the
service's and the replicated state's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spur.accounting.tres import TRES_DEFS, TresError, parse_tres
from spur.core.timespec import TimeSpecError, parse_duration_secs
from spur.rest.slurmdb import (
    AccountRecord,
    AssociationFilter,
    AssociationRecord,
    ClusterRecord,
    QosRecord,
    TresRecord,
    UserRecord,
)

Row = Mapping[str, str]
_TRES_BY_KEY = {d.key: d for d in TRES_DEFS}


# ---------------------------------------------------------------------------- printed values


def _int(raw: str | None) -> int | None:
    """A printed whole number (blank: not set)."""
    raw = (raw or "").strip()
    return int(raw) if raw.lstrip("-").isdigit() else None


def _minutes(raw: str | None) -> int | None:
    """A printed time limit (``1-00:00:00``) in whole minutes (blank/UNLIMITED: not set)."""
    raw = (raw or "").strip()
    if not raw:
        return None
    try:
        secs = parse_duration_secs(raw)
    except TimeSpecError:
        return None
    return secs // 60 if secs >= 0 else None


def tres_list(spec: str | None) -> tuple[TresRecord, ...]:
    """A printed TRES spec (``cpu=16,gres/gpu=8,mem=32G``) as slurmdb TRES entries (mem in MiB)."""
    try:
        counts = parse_tres(spec or "")
    except TresError:
        return ()
    out = []
    for key, count in counts.items():
        d = _TRES_BY_KEY.get(key)
        if d is not None:
            out.append(TresRecord(type=d.type, name=d.name, id=d.id, count=count))
    return tuple(out)


def _names(raw: str | None) -> tuple[str, ...]:
    return tuple(v for v in (raw or "").split(",") if v)


# ---------------------------------------------------------------------------- rows -> records


def _short(row: Row) -> tuple[str, str, str, str]:
    return (row.get("account", ""), row.get("cluster", ""), row.get("partition", ""), row.get("user", ""))


def account_records(accounts: Iterable[Row], assocs: Iterable[Row]) -> list[AccountRecord]:
    """``Show account`` rows, with the associations of each account (``Show association`` rows)."""
    by_account: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in assocs:
        by_account.setdefault(row.get("account", ""), []).append(_short(row))
    return [
        AccountRecord(
            name=row["account"],
            description=row.get("description", ""),
            organization=row.get("organization", ""),
            associations=tuple(by_account.get(row["account"], ())),
        )
        for row in accounts
    ]


def user_records(users: Iterable[Row], assocs: Iterable[Row]) -> list[UserRecord]:
    """``Show user`` rows, with each user's associations."""
    by_user: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in assocs:
        if row.get("user"):
            by_user.setdefault(row["user"], []).append(_short(row))
    return [
        UserRecord(
            name=row["user"],
            administrator_level=row.get("adminlevel", "None") or "None",
            default_account=row.get("defaultaccount", ""),
            associations=tuple(by_user.get(row["user"], ())),
        )
        for row in users
    ]


def association_records(assocs: Iterable[Row], users: Iterable[Row]) -> list[AssociationRecord]:
    """``Show association`` rows (tree order); ``users`` (``Show user`` rows) tell which user
    association is the user's default."""
    defaults = {row["user"]: row.get("defaultaccount", "") for row in users}
    out = []
    for row in assocs:
        user = row.get("user") or None
        out.append(
            AssociationRecord(
                account=row["account"],
                cluster=row.get("cluster", ""),
                user=user,
                partition=row.get("partition") or None,
                parent_account=row.get("parentname") or None,
                qos=_names(row.get("qos")),
                default_qos=row.get("defaultqos") or None,
                is_default=user is not None and defaults.get(user) == row["account"],
                shares_raw=_int(row.get("share")) or 0,
                max_jobs=_int(row.get("maxjobs")),
                max_submit_jobs=_int(row.get("maxsubmit")),
                max_wall_minutes=_minutes(row.get("maxwall")),
                grp_tres=tres_list(row.get("grptres")),
                max_tres_per_job=tres_list(row.get("maxtresperjob")),
                grp_jobs=_int(row.get("grpjobs")),
                grp_submit_jobs=_int(row.get("grpsubmit")),
            )
        )
    return out


def qos_records(rows: Iterable[Row]) -> list[QosRecord]:
    """``Show qos`` rows. Spur's QOS have no numeric ids: ``id`` is the position in definition order
    (``normal`` is 1, as in slurmdbd)."""
    out = []
    for i, row in enumerate(rows):
        try:
            factor = float(row.get("usagefactor") or 1.0)
        except ValueError:
            factor = 1.0
        out.append(
            QosRecord(
                name=row["name"],
                id=i + 1,
                description=row.get("description", ""),
                priority=_int(row.get("priority")) or 0,
                flags=_names(row.get("flags")),
                usage_factor=factor,
                max_wall_minutes_per_job=_minutes(row.get("maxwall")),
                max_jobs_per_user=_int(row.get("maxjobspu")),
                max_tres_per_job=tres_list(row.get("maxtresperjob")),
                max_tres_per_user=tres_list(row.get("maxtresperuser")),
                preempt=_names(row.get("preempt")),
                preempt_mode=(row.get("preemptmode") or "cluster",),
            )
        )
    return out


def tres_records(rows: Iterable[Row]) -> list[TresRecord]:
    """``Show tres`` rows (the TRES definitions; counts are 0)."""
    return [TresRecord(type=r["type"], name=r.get("name", ""), id=_int(r.get("id")) or 0) for r in rows]


def cluster_records(rows: Iterable[Row]) -> list[ClusterRecord]:
    """``Show cluster`` rows."""
    return [
        ClusterRecord(
            name=r["cluster"],
            host=r.get("controlhost", ""),
            port=_int(r.get("controlport")) or 0,
            rpc_version=_int(r.get("rpc")) or 9728,
        )
        for r in rows
    ]


def matches(row: Row, flt: AssociationFilter) -> bool:
    """Whether an association row is selected by the ``cluster``/``account``/``user``/``partition``
    query (None: any; an empty user or partition never names one)."""
    for key, wanted in (("cluster", flt.cluster), ("account", flt.account), ("user", flt.user),
                        ("partition", flt.partition)):  # fmt: skip
        if wanted is not None and row.get(key, "") not in {w for w in wanted.split(",") if w}:
            return False
    return True


# ---------------------------------------------------------------------------- records -> Change


def account_values(rec: AccountRecord) -> dict[str, str]:
    """The settings of a POSTed account (only the fields it sets)."""
    out = {}
    if rec.description:
        out["description"] = rec.description
    if rec.organization:
        out["organization"] = rec.organization
    return out


def user_add_values(rec: UserRecord) -> dict[str, str]:
    """``add user`` settings for a new user: its default account is its first association."""
    out = {}
    if rec.default_account:
        out["account"] = rec.default_account
        out["defaultaccount"] = rec.default_account
    if rec.administrator_level:
        out["adminlevel"] = rec.administrator_level
    return out


def user_modify_values(rec: UserRecord) -> dict[str, str]:
    """``modify user`` settings for an existing user (only the fields the record sets)."""
    out = {}
    if rec.default_account:
        out["defaultaccount"] = rec.default_account
    if rec.administrator_level:
        out["adminlevel"] = rec.administrator_level
    return out


def association_values(rec: AssociationRecord) -> dict[str, str]:
    """The association settings of a POSTed association: share, QOS, default QOS."""
    out = {"fairshare": str(rec.shares_raw), "qos": ",".join(rec.qos)}
    if rec.default_qos:
        out["defaultqos"] = rec.default_qos
    return out


def qos_values(rec: QosRecord) -> dict[str, str]:
    """The settings of a POSTed QOS: description, priority, flags (a POST sets all three)."""
    out = {"priority": str(rec.priority), "flags": ",".join(rec.flags)}
    if rec.description:
        out["description"] = rec.description
    return out
