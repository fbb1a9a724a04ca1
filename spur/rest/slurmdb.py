"""slurmdb/v0.0.38 accounting entities: records, JSON mapping (pure) and the route table.

Spur's accounting entities (accounts, users, associations, QOS, TRES, clusters, wckeys) live behind
an *accounting backend*: any object with some of the async methods named in :data:`ENTITY_ROUTES`
(``list_accounts``, ``get_account``, ``add_accounts``, ``delete_account``, ...). Each takes the
caller's call metadata (``md``, from :mod:`spur.rest.auth`), the peer, and the operation's input,
returns records of this module (or None for "no such entity"), and raises ``RpcError`` for a
refusal (mapped like every service error). The backend must reach the controller through
:meth:`spur.rest.adapter.ServiceAdapter.call` (a ControllerService or accounting service method),
so the ``[auth]`` interceptor authenticates ``md`` and the service applies its rules. The REST app registers exactly the routes whose backend
method exists, so the served OpenAPI document lists only what the backend implements; with no
backend (``Controller.accounting_backend`` is None) none of these routes exist.

The mappers produce slurmrestd 22.05's shapes (see tests/fixtures/slurmrestd/
slurmdb_associations.json); the body parsers validate POST bodies and raise :class:`RestError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spur.rest.errors import ESLURM_DATA_CONV_FAILED, ESLURM_REST_INVALID_QUERY, RestError

_MAX_NAME = 256


# ---------------------------------------------------------------------------- records


@dataclass(frozen=True)
class TresRecord:
    type: str
    name: str = ""
    id: int = 0
    count: int = 0


@dataclass(frozen=True)
class AccountRecord:
    name: str
    description: str = ""
    organization: str = ""
    coordinators: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    associations: tuple[tuple[str, str, str, str], ...] = ()  # (account, cluster, partition, user)


@dataclass(frozen=True)
class UserRecord:
    name: str
    administrator_level: str = "None"  # None | Operator | Administrator
    default_account: str = ""
    default_wckey: str = ""
    coordinators: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    associations: tuple[tuple[str, str, str, str], ...] = ()


@dataclass(frozen=True)
class AssociationRecord:
    account: str
    cluster: str
    user: str | None = None
    partition: str | None = None
    parent_account: str | None = None
    qos: tuple[str, ...] = ("normal",)
    default_qos: str | None = None
    is_default: bool = False
    shares_raw: int = 1
    priority: int | None = None
    max_jobs: int | None = None
    max_submit_jobs: int | None = None
    max_wall_minutes: int | None = None
    grp_tres: tuple[TresRecord, ...] = ()
    max_tres_per_job: tuple[TresRecord, ...] = ()
    max_tres_per_node: tuple[TresRecord, ...] = ()
    flags: tuple[str, ...] = ()
    grp_jobs: int | None = None  # max.jobs.active
    grp_submit_jobs: int | None = None  # max.jobs.total


@dataclass(frozen=True)
class QosRecord:
    name: str
    id: int = 0
    description: str = ""
    priority: int = 0
    flags: tuple[str, ...] = ()
    usage_factor: float = 1.0
    usage_threshold: float | None = None
    max_wall_minutes_per_job: int | None = None
    max_jobs_per_user: int | None = None
    max_jobs_per_account: int | None = None
    max_tres_per_job: tuple[TresRecord, ...] = ()
    max_tres_per_user: tuple[TresRecord, ...] = ()
    preempt: tuple[str, ...] = ()
    preempt_mode: tuple[str, ...] = ("cluster",)


@dataclass(frozen=True)
class ClusterRecord:
    name: str
    host: str = ""
    port: int = 0
    nodes: str = ""
    rpc_version: int = 9728
    tres: tuple[TresRecord, ...] = ()
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class WckeyRecord:
    name: str
    user: str
    cluster: str
    id: int = 0
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssociationFilter:
    """``cluster``/``account``/``user``/``partition`` query parameters (None: any)."""

    cluster: str | None = None
    account: str | None = None
    user: str | None = None
    partition: str | None = None


# ---------------------------------------------------------------------------- records -> JSON


def tres_to_json(t: TresRecord) -> dict[str, Any]:
    return {"type": t.type, "name": t.name, "id": t.id, "count": t.count}


def _short(assoc: tuple[str, str, str, str]) -> dict[str, Any]:
    account, cluster, partition, user = assoc
    return {"account": account, "cluster": cluster, "partition": partition or None, "user": user or None}


def account_to_json(a: AccountRecord) -> dict[str, Any]:
    return {
        "associations": [_short(x) for x in a.associations],
        "coordinators": [{"name": c, "direct": 1} for c in a.coordinators],
        "description": a.description,
        "name": a.name,
        "organization": a.organization,
        "flags": list(a.flags),
    }


def user_to_json(u: UserRecord) -> dict[str, Any]:
    return {
        "administrator_level": u.administrator_level,
        "associations": [_short(x) for x in u.associations],
        "coordinators": [{"name": c, "direct": 1} for c in u.coordinators],
        "default": {"account": u.default_account, "wckey": u.default_wckey},
        "flags": list(u.flags),
        "name": u.name,
    }


def association_to_json(a: AssociationRecord) -> dict[str, Any]:
    """One ``dbv0.0.38_association``, exactly as slurmrestd 22.05 lays it out."""
    return {
        "account": a.account,
        "cluster": a.cluster,
        "default": {"qos": a.default_qos},
        "flags": list(a.flags) + (["DEFAULT"] if a.is_default and "DEFAULT" not in a.flags else []),
        "max": {
            "jobs": {
                "per": {"count": a.max_jobs, "accruing": None, "submitted": a.max_submit_jobs,
                        "wall_clock": a.max_wall_minutes},
                "active": a.grp_jobs,
                "accruing": None,
                "total": a.grp_submit_jobs,
            },
            "tres": {
                "total": [tres_to_json(t) for t in a.grp_tres],
                "minutes": {"per": {"job": []}, "total": []},
                "group": {"minutes": [], "active": []},
                "per": {"job": [tres_to_json(t) for t in a.max_tres_per_job],
                        "node": [tres_to_json(t) for t in a.max_tres_per_node]},
            },
            "per": {"account": {"wall_clock": None}},
        },
        "is_default": 1 if a.is_default else 0,
        "min": {"priority_threshold": None},
        "parent_account": a.parent_account,
        "partition": a.partition,
        "priority": a.priority,
        "qos": list(a.qos),
        "shares_raw": a.shares_raw,
        "usage": None,
        "user": a.user,
    }  # fmt: skip


def qos_to_json(q: QosRecord) -> dict[str, Any]:
    return {
        "description": q.description,
        "flags": list(q.flags),
        "id": str(q.id),
        "limits": {
            "factor": None,
            "max": {
                "wall_clock": {"per": {"qos": None, "job": q.max_wall_minutes_per_job}},
                "jobs": {"active_jobs": {"per": {"account": q.max_jobs_per_account, "user": q.max_jobs_per_user}}},
                "accruing": {"per": {"account": None, "user": None}},
                "tres": {
                    "minutes": {"per": {"job": [], "account": [], "user": [], "qos": []}},
                    "per": {"account": [], "job": [tres_to_json(t) for t in q.max_tres_per_job], "node": [],
                            "user": [tres_to_json(t) for t in q.max_tres_per_user]},
                },
            },
            "min": {"priority_threshold": None, "tres": {"per": {"job": []}}},
        },
        "preempt": {"list": list(q.preempt), "mode": list(q.preempt_mode), "exempt_time": None},
        "priority": q.priority,
        "usage_factor": q.usage_factor,
        "usage_threshold": q.usage_threshold,
        "name": q.name,
    }  # fmt: skip


def cluster_to_json(c: ClusterRecord) -> dict[str, Any]:
    return {
        "controller": {"host": c.host, "port": c.port},
        "flags": list(c.flags),
        "name": c.name,
        "nodes": c.nodes,
        "select_plugin": "",
        "associations": {"root": {"account": "root", "cluster": c.name, "partition": None, "user": None}},
        "rpc_version": c.rpc_version,
        "tres": [tres_to_json(t) for t in c.tres],
    }


def wckey_to_json(w: WckeyRecord) -> dict[str, Any]:
    return {"accounting": [], "cluster": w.cluster, "id": w.id, "name": w.name, "user": w.user, "flags": list(w.flags)}


# ---------------------------------------------------------------------------- JSON -> records


def _items(body: Mapping[str, Any], key: str, source: str) -> list[Mapping[str, Any]]:
    items = body.get(key)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise RestError(400, ESLURM_REST_INVALID_QUERY, f"{key} must be a list of objects", source)
    return items


def _text(item: Mapping[str, Any], key: str, where: str, source: str, *, required: bool = False) -> str:
    value = item.get(key)
    if value is None:
        if required:
            raise RestError(400, ESLURM_REST_INVALID_QUERY, f"{where}.{key} must be set", source)
        return ""
    if not isinstance(value, str) or len(value) > _MAX_NAME or (required and not value.strip()):
        raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.{key}: expected a name (string)", source)
    return value


def _names(value: Any, where: str, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= _MAX_NAME for v in value):
        raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}: expected a list of names", source)
    return tuple(value)


def accounts_from_body(body: Mapping[str, Any], source: str) -> list[AccountRecord]:
    out = []
    for i, item in enumerate(_items(body, "accounts", source)):
        where = f"accounts[{i}]"
        out.append(
            AccountRecord(
                name=_text(item, "name", where, source, required=True),
                description=_text(item, "description", where, source),
                organization=_text(item, "organization", where, source),
                flags=_names(item.get("flags"), f"{where}.flags", source),
            )
        )
    return out


def users_from_body(body: Mapping[str, Any], source: str) -> list[UserRecord]:
    out = []
    for i, item in enumerate(_items(body, "users", source)):
        where = f"users[{i}]"
        default = item.get("default") or {}
        if not isinstance(default, dict):
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.default: expected an object", source)
        level = _text(item, "administrator_level", where, source)  # "": not given, leave as is
        if level and level not in ("None", "Operator", "Administrator"):
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.administrator_level: None, Operator or Administrator", source)
        out.append(
            UserRecord(
                name=_text(item, "name", where, source, required=True),
                administrator_level=level,
                default_account=_text(default, "account", f"{where}.default", source),
                default_wckey=_text(default, "wckey", f"{where}.default", source),
            )
        )
    return out


def associations_from_body(body: Mapping[str, Any], source: str) -> list[AssociationRecord]:
    out = []
    for i, item in enumerate(_items(body, "associations", source)):
        where = f"associations[{i}]"
        shares = item.get("shares_raw", 1)
        if isinstance(shares, bool) or not isinstance(shares, int) or not 0 <= shares < 2**31:
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.shares_raw: expected a share count", source)
        default = item.get("default") or {}
        out.append(
            AssociationRecord(
                account=_text(item, "account", where, source, required=True),
                cluster=_text(item, "cluster", where, source, required=True),
                user=_text(item, "user", where, source) or None,
                partition=_text(item, "partition", where, source) or None,
                parent_account=_text(item, "parent_account", where, source) or None,
                qos=_names(item.get("qos"), f"{where}.qos", source) or ("normal",),
                default_qos=_text(default, "qos", f"{where}.default", source) or None if isinstance(default, dict) else None,
                shares_raw=shares,
            )
        )
    return out


def qos_from_body(body: Mapping[str, Any], source: str) -> list[QosRecord]:
    out = []
    for i, item in enumerate(_items(body, "qos", source)):
        where = f"qos[{i}]"
        priority = item.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority < 2**32:
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.priority: expected a priority", source)
        out.append(
            QosRecord(
                name=_text(item, "name", where, source, required=True),
                description=_text(item, "description", where, source),
                priority=priority,
                flags=_names(item.get("flags"), f"{where}.flags", source),
            )
        )
    return out


def wckeys_from_body(body: Mapping[str, Any], source: str) -> list[WckeyRecord]:
    return [
        WckeyRecord(
            name=_text(item, "name", f"wckeys[{i}]", source, required=True),
            user=_text(item, "user", f"wckeys[{i}]", source, required=True),
            cluster=_text(item, "cluster", f"wckeys[{i}]", source, required=True),
        )
        for i, item in enumerate(_items(body, "wckeys", source))
    ]


def clusters_from_body(body: Mapping[str, Any], source: str) -> list[ClusterRecord]:
    return [
        ClusterRecord(name=_text(item, "name", f"clusters[{i}]", source, required=True))
        for i, item in enumerate(_items(body, "clusters", source))
    ]


def tres_from_body(body: Mapping[str, Any], source: str) -> list[TresRecord]:
    out = []
    for i, item in enumerate(_items(body, "tres", source)):
        out.append(
            TresRecord(
                type=_text(item, "type", f"tres[{i}]", source, required=True),
                name=_text(item, "name", f"tres[{i}]", source),
            )
        )
    return out


@dataclass(frozen=True)
class ConfigLoad:
    """``POST slurmdb/v0.0.38/config``: entities to add, in dependency order for the backend."""

    clusters: tuple[ClusterRecord, ...] = ()
    tres: tuple[TresRecord, ...] = ()
    accounts: tuple[AccountRecord, ...] = ()
    users: tuple[UserRecord, ...] = ()
    qos: tuple[QosRecord, ...] = ()
    wckeys: tuple[WckeyRecord, ...] = ()
    associations: tuple[AssociationRecord, ...] = ()


def config_from_body(body: Mapping[str, Any], source: str) -> ConfigLoad:
    """A ``dbv0.0.38_set_config`` body (every list optional; ``accounts``/``clusters`` entries are
    themselves ``{"accounts": [...]}``/``{"clusters": [...]}`` objects, as the document nests them)."""

    def nested(key: str, inner: str, parse: Any) -> tuple[Any, ...]:
        if body.get(key) is None:
            return ()
        out: list[Any] = []
        for item in _items(body, key, source):
            out.extend(parse(item, source) if inner in item else parse({inner: [item]}, source))
        return tuple(out)

    def flat(key: str, parse: Any) -> tuple[Any, ...]:
        return tuple(parse({key: body[key]}, source)) if body.get(key) is not None else ()

    tres = tuple(tres_from_body({"tres": body["TRES"]}, source)) if body.get("TRES") is not None else ()
    return ConfigLoad(
        clusters=nested("clusters", "clusters", clusters_from_body),
        tres=tres,
        accounts=nested("accounts", "accounts", accounts_from_body),
        users=flat("users", users_from_body),
        qos=flat("qos", qos_from_body),
        wckeys=flat("wckeys", wckeys_from_body),
        associations=flat("associations", associations_from_body),
    )


def association_filter(query: Mapping[str, str]) -> AssociationFilter:
    def get(key: str) -> str | None:
        value = query.get(key)
        return value if value else None

    return AssociationFilter(get("cluster"), get("account"), get("user"), get("partition"))


# ---------------------------------------------------------------------------- route table


@dataclass(frozen=True)
class EntityRoute:
    """One slurmdb operation: OpenAPI ``path`` and ``method``, the backend method serving it, and
    how its input and output are mapped. ``kind``: ``list`` (no input), ``get``/``delete`` (the path
    parameter), ``add`` (``parse`` turns the body into records), ``filter_list``/``filter_delete``
    (an :class:`AssociationFilter` from the query). ``key`` is the response's list field."""

    path: str
    method: str
    backend_method: str
    kind: str
    key: str = ""
    to_json: Any = None
    parse: Any = None
    param: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


_D = "/slurmdb/v0.0.38"

ENTITY_ROUTES: Sequence[EntityRoute] = (
    EntityRoute(f"{_D}/accounts", "get", "list_accounts", "list", "accounts", account_to_json),
    EntityRoute(f"{_D}/accounts", "post", "add_accounts", "add", parse=accounts_from_body),
    EntityRoute(f"{_D}/account/{{account_name}}", "get", "get_account", "get", "accounts", account_to_json, param="account_name"),
    EntityRoute(f"{_D}/account/{{account_name}}", "delete", "delete_account", "delete", param="account_name"),
    EntityRoute(f"{_D}/users", "get", "list_users", "list", "users", user_to_json),
    EntityRoute(f"{_D}/users", "post", "add_users", "add", parse=users_from_body),
    EntityRoute(f"{_D}/user/{{user_name}}", "get", "get_user", "get", "users", user_to_json, param="user_name"),
    EntityRoute(f"{_D}/user/{{user_name}}", "delete", "delete_user", "delete", param="user_name"),
    EntityRoute(f"{_D}/associations", "get", "list_associations", "filter_list", "associations", association_to_json),
    EntityRoute(f"{_D}/associations", "post", "add_associations", "add", parse=associations_from_body),
    EntityRoute(f"{_D}/associations", "delete", "delete_associations", "filter_delete"),
    EntityRoute(f"{_D}/association", "get", "list_associations", "filter_list", "associations", association_to_json),
    EntityRoute(f"{_D}/association", "delete", "delete_associations", "filter_delete"),
    EntityRoute(f"{_D}/qos", "get", "list_qos", "list", "qos", qos_to_json),
    EntityRoute(f"{_D}/qos", "post", "add_qos", "add", parse=qos_from_body),
    EntityRoute(f"{_D}/qos/{{qos_name}}", "get", "get_qos", "get", "qos", qos_to_json, param="qos_name"),
    EntityRoute(f"{_D}/qos/{{qos_name}}", "delete", "delete_qos", "delete", param="qos_name"),
    EntityRoute(f"{_D}/tres", "get", "list_tres", "list", "tres", tres_to_json),
    EntityRoute(f"{_D}/tres", "post", "add_tres", "add", parse=tres_from_body),
    EntityRoute(f"{_D}/clusters", "get", "list_clusters", "list", "clusters", cluster_to_json),
    EntityRoute(f"{_D}/clusters", "post", "add_clusters", "add", parse=clusters_from_body),
    EntityRoute(f"{_D}/cluster/{{cluster_name}}", "get", "get_cluster", "get", "clusters", cluster_to_json, param="cluster_name"),
    EntityRoute(f"{_D}/cluster/{{cluster_name}}", "delete", "delete_cluster", "delete", param="cluster_name"),
    EntityRoute(f"{_D}/wckeys", "get", "list_wckeys", "list", "wckeys", wckey_to_json),
    EntityRoute(f"{_D}/wckeys", "post", "add_wckeys", "add", parse=wckeys_from_body),
    EntityRoute(f"{_D}/wckey/{{wckey}}", "get", "get_wckey", "get", "wckeys", wckey_to_json, param="wckey"),
    EntityRoute(f"{_D}/wckey/{{wckey}}", "delete", "delete_wckey", "delete", param="wckey"),
    EntityRoute(f"{_D}/config", "post", "load_config", "add", parse=config_from_body),
)  # fmt: skip
