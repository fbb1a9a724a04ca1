"""The REST accounting backend: slurmdb/v0.0.38 accounts, users, associations, QOS, TRES, clusters and
wckeys over the ``spur.v1.Accounting`` service (the one sacctmgr uses).

Every method calls ``Accounting.Show`` or ``Accounting.Change`` through
:meth:`spur.rest.adapter.ServiceAdapter.call`, so the ``[auth]`` interceptor authenticates the caller
and the service applies its rules (only administrators change entities; leader forwarding and
linearizable reads; the replicated state validates names, limits and deletability). Nothing here
decides who may do what. See :data:`spur.rest.slurmdb.ENTITY_ROUTES` for the contract (each method
takes the caller's metadata ``md``, the ``peer`` and the operation's input).

What a POST means (slurmrestd's "update" semantics): a record naming an entity that does not exist
adds it; one naming an existing entity modifies the fields it sets (accounts: description,
organization; users: default account, admin level; associations: share, QOS, default QOS, and for
an account association its parent; QOS: description, priority, flags). A new user needs a default
account (Spur users always have an association), as ``sacctmgr add user`` does. A list is applied
record by record: a refusal stops there, with the records before it applied.

Spur keeps no WCKeys (as slurmdbd with ``TrackWCKey=no``): ``GET wckeys`` is an empty list, ``GET``
and ``DELETE wckey/{name}`` answer "nothing found" (404, 9003), and ``POST wckeys`` is refused with
Slurm's 2036 "Requested operation not supported on this system" (400). ``POST tres`` is refused the
same way (slurmrestd 22.05: "Updating TRES is not currently supported"). Administrators only are
told "not supported"; anyone else gets the service's 403 first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spur.rest import acct_records as ar
from spur.rest.adapter import ServiceAdapter
from spur.rest.errors import (
    ESLURM_NOT_SUPPORTED,
    ESLURM_REST_EMPTY_RESULT,
    ESLURM_REST_INVALID_QUERY,
    RestError,
)
from spur.rest.slurmdb import (
    AccountRecord,
    AssociationFilter,
    AssociationRecord,
    ClusterRecord,
    ConfigLoad,
    QosRecord,
    TresRecord,
    UserRecord,
    WckeyRecord,
)
from spur.rpc.proto import accounting_pb2 as apb

if TYPE_CHECKING:
    from spur.rest.host import RestHost

ACCOUNTING_PATH = "/spur.v1.Accounting/"
Md = dict[str, str]


class AccountingBackend:
    """See the module docstring. ``service``: the controller's AccountingService instance."""

    def __init__(self, ctl: RestHost, service: Any) -> None:
        self.ctl = ctl
        self.adapter = ServiceAdapter(ctl, service, ACCOUNTING_PATH)

    # ------------------------------------------------------------------ service calls

    async def _show(self, md: Md, peer: str, entity: str, source: str) -> list[dict[str, str]]:
        resp = await self.adapter.call("Show", apb.AcctShowRequest(entity=entity), md, peer, source)
        return [dict(r.fields) for r in resp.records]

    async def _change(
        self,
        md: Md,
        peer: str,
        source: str,
        op: str,
        entity: str,
        *,
        names: Sequence[str] = (),
        where: dict[str, str] | None = None,
        values: dict[str, str] | None = None,
    ) -> list[str]:
        req = apb.AcctChangeRequest(op=op, entity=entity, names=list(names), where=where or {}, values=values or {})
        resp = await self.adapter.call("Change", req, md, peer, source)
        return list(resp.lines)

    async def _add_or_modify(
        self,
        md: Md,
        peer: str,
        source: str,
        entity: str,
        name: str,
        add_values: dict[str, str],
        modify_values: dict[str, str],
    ) -> None:
        """Add ``name``; when it exists already (the service's 409), modify what the record sets."""
        try:
            await self._change(md, peer, source, "add", entity, names=[name], values=add_values)
        except RestError as exc:
            if exc.status != 409:
                raise
            if modify_values:
                await self._change(md, peer, source, "modify", entity, where={"name": name}, values=modify_values)

    # ------------------------------------------------------------------ accounts

    async def list_accounts(self, md: Md, peer: str) -> list[AccountRecord]:
        source = "op_handler_accounts"
        accounts = await self._show(md, peer, "account", source)
        return ar.account_records(accounts, await self._show(md, peer, "association", source))

    async def get_account(self, md: Md, peer: str, name: str) -> AccountRecord | None:
        return next((a for a in await self.list_accounts(md, peer) if a.name == name), None)

    async def add_accounts(self, md: Md, peer: str, records: list[AccountRecord]) -> None:
        for rec in records:
            values = ar.account_values(rec)
            await self._add_or_modify(md, peer, "op_handler_accounts", "account", rec.name, values, values)

    async def delete_account(self, md: Md, peer: str, name: str) -> None:
        await self._change(md, peer, "op_handler_account", "delete", "account", where={"name": name})

    # ------------------------------------------------------------------ users

    async def list_users(self, md: Md, peer: str) -> list[UserRecord]:
        source = "op_handler_users"
        users = await self._show(md, peer, "user", source)
        return ar.user_records(users, await self._show(md, peer, "association", source))

    async def get_user(self, md: Md, peer: str, name: str) -> UserRecord | None:
        return next((u for u in await self.list_users(md, peer) if u.name == name), None)

    async def add_users(self, md: Md, peer: str, records: list[UserRecord]) -> None:
        source = "op_handler_users"
        for rec in records:
            known = {row["user"] for row in await self._show(md, peer, "user", source)}
            if rec.name not in known:
                await self._change(md, peer, source, "add", "user", names=[rec.name], values=ar.user_add_values(rec))
                continue
            values = ar.user_modify_values(rec)
            if values:
                await self._change(md, peer, source, "modify", "user", where={"name": rec.name}, values=values)

    async def delete_user(self, md: Md, peer: str, name: str) -> None:
        await self._change(md, peer, "op_handler_user", "delete", "user", where={"name": name})

    # ------------------------------------------------------------------ associations

    async def list_associations(self, md: Md, peer: str, flt: AssociationFilter) -> list[AssociationRecord]:
        source = "op_handler_associations"
        rows = [r for r in await self._show(md, peer, "association", source) if ar.matches(r, flt)]
        return ar.association_records(rows, await self._show(md, peer, "user", source))

    async def add_associations(self, md: Md, peer: str, records: list[AssociationRecord]) -> None:
        source = "op_handler_associations"
        for rec in records:
            if rec.cluster != self.ctl.cfg.cluster_name:
                raise RestError(
                    400, ESLURM_REST_INVALID_QUERY,
                    f"association for cluster {rec.cluster!r}: this is cluster {self.ctl.cfg.cluster_name!r}",
                    source,
                )  # fmt: skip
            values = ar.association_values(rec)
            if rec.user:
                add = {**values, "account": rec.account, **({"partition": rec.partition} if rec.partition else {})}
                try:
                    await self._change(md, peer, source, "add", "user", names=[rec.user], values=add)
                except RestError as exc:
                    if exc.status != 409:
                        raise
                    where = {"name": rec.user, "account": rec.account, "partition": rec.partition or ""}
                    await self._change(md, peer, source, "modify", "user", where=where, values=values)
            else:
                parent = {"parent": rec.parent_account} if rec.parent_account else {}
                await self._add_or_modify(
                    md, peer, source, "account", rec.account, {**values, **parent}, {**values, **parent}
                )

    async def delete_associations(self, md: Md, peer: str, flt: AssociationFilter) -> None:
        """Delete the selected associations: user associations first, then (when the query names no
        user) the selected accounts, which the service refuses while they still have children."""
        source = "op_handler_associations"
        if flt.account is None and flt.user is None:
            raise RestError(400, ESLURM_REST_INVALID_QUERY, "name an account or a user to delete associations", source)
        rows = [r for r in await self._show(md, peer, "association", source) if ar.matches(r, flt)]
        if not rows:
            raise RestError(404, ESLURM_REST_EMPTY_RESULT, "no association matches the query", source)
        for row in (r for r in rows if r.get("user")):
            where = {"name": row["user"], "account": row["account"], "partition": row.get("partition", "")}
            await self._change(md, peer, source, "delete", "user", where=where)
        for row in (r for r in rows if not r.get("user")):
            await self._change(md, peer, source, "delete", "account", where={"name": row["account"]})

    # ------------------------------------------------------------------ QOS

    async def list_qos(self, md: Md, peer: str) -> list[QosRecord]:
        return ar.qos_records(await self._show(md, peer, "qos", "op_handler_qos"))

    async def get_qos(self, md: Md, peer: str, name: str) -> QosRecord | None:
        return next((q for q in await self.list_qos(md, peer) if q.name == name), None)

    async def add_qos(self, md: Md, peer: str, records: list[QosRecord]) -> None:
        for rec in records:
            values = ar.qos_values(rec)
            await self._add_or_modify(md, peer, "op_handler_qos", "qos", rec.name, values, values)

    async def delete_qos(self, md: Md, peer: str, name: str) -> None:
        await self._change(md, peer, "op_handler_qos", "delete", "qos", where={"name": name})

    # ------------------------------------------------------------------ TRES

    async def list_tres(self, md: Md, peer: str) -> list[TresRecord]:
        return ar.tres_records(await self._show(md, peer, "tres", "op_handler_tres"))

    async def add_tres(self, md: Md, peer: str, records: list[TresRecord]) -> None:
        """slurmrestd 22.05 refuses TRES updates; so does Spur (its TRES are fixed), after the
        service's admin check (the service refuses ``add tres`` itself)."""
        source = "op_handler_tres"
        try:
            await self._change(md, peer, source, "add", "tres", names=[r.type for r in records][:1] or ["cpu"])
        except RestError as exc:
            if exc.status != 400:  # 401/403 (the caller may not), 503 (no leader): as they are
                raise
        raise RestError(400, ESLURM_NOT_SUPPORTED, "Updating TRES is not currently supported", source)

    # ------------------------------------------------------------------ clusters

    async def list_clusters(self, md: Md, peer: str) -> list[ClusterRecord]:
        return ar.cluster_records(await self._show(md, peer, "cluster", "op_handler_clusters"))

    async def get_cluster(self, md: Md, peer: str, name: str) -> ClusterRecord | None:
        return next((c for c in await self.list_clusters(md, peer) if c.name == name), None)

    async def add_clusters(self, md: Md, peer: str, records: list[ClusterRecord]) -> None:
        for rec in records:
            await self._add_or_modify(md, peer, "op_handler_clusters", "cluster", rec.name, {}, {})

    async def delete_cluster(self, md: Md, peer: str, name: str) -> None:
        await self._change(md, peer, "op_handler_cluster", "delete", "cluster", where={"name": name})

    # ------------------------------------------------------------------ wckeys (none kept)

    async def list_wckeys(self, md: Md, peer: str) -> list[WckeyRecord]:
        await self._show(md, peer, "cluster", "op_handler_wckeys")  # authenticates like every read
        return []

    async def get_wckey(self, md: Md, peer: str, name: str) -> WckeyRecord | None:
        await self._show(md, peer, "cluster", "op_handler_wckey")
        return None

    async def _no_wckeys(self, md: Md, peer: str, op: str, source: str) -> None:
        """Ask the service to change a ``wckey``: it refuses non-admins (403) and, for admins, names
        no such entity; the latter is answered here in slurmdbd's words."""
        try:
            await self._change(md, peer, source, op, "wckey", where={"name": "-"} if op == "delete" else None)
        except RestError as exc:
            if exc.status != 400:  # 401/403 (the caller may not), 503 (no leader): as they are
                raise

    async def add_wckeys(self, md: Md, peer: str, records: list[WckeyRecord]) -> None:
        source = "op_handler_wckeys"
        await self._no_wckeys(md, peer, "add", source)
        raise RestError(
            400, ESLURM_NOT_SUPPORTED, "WCKeys are not tracked by Spur (TrackWCKey=no): none can be added", source
        )

    async def delete_wckey(self, md: Md, peer: str, name: str) -> None:
        source = "op_handler_wckey"
        await self._no_wckeys(md, peer, "delete", source)
        raise RestError(404, ESLURM_REST_EMPTY_RESULT, f"no wckey {name!r} (Spur keeps no WCKeys)", source)

    # ------------------------------------------------------------------ config

    async def load_config(self, md: Md, peer: str, load: ConfigLoad) -> None:
        """``POST config``: the refusals that change nothing first (TRES, wckeys), then clusters,
        QOS, accounts, users and associations, in that order (later ones refer to earlier ones)."""
        if load.tres:
            await self.add_tres(md, peer, list(load.tres))
        if load.wckeys:
            await self.add_wckeys(md, peer, list(load.wckeys))
        await self.add_clusters(md, peer, list(load.clusters))
        await self.add_qos(md, peer, list(load.qos))
        await self.add_accounts(md, peer, list(load.accounts))
        await self.add_users(md, peer, list(load.users))
        await self.add_associations(md, peer, list(load.associations))
