"""The ``spur.v1.Accounting`` gRPC service of spurctld (sacctmgr, sshare, sprio).

Every call is served by the leader (writes must be proposed there and reads are linearizable only
there); a follower forwards it with the caller's metadata, as ``ControllerService`` does.
Mutations are for administrators: see :func:`may_administer`, the one place that decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spur.auth.admin import DomainSource, is_admin
from spur.auth.identity import Identity
from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import accounting_pb2 as apb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state.accounting import (
    ENTITIES,
    AccountingDomain,
    AcctAdd,
    AcctDelete,
    AcctModify,
    ConfigureAccounting,
)

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

SERVICE = apb.DESCRIPTOR.services_by_name["Accounting"]


def may_administer(ident: Identity, state: DomainSource) -> bool:
    """Whether ``ident`` may change accounting entities: the system administrator (uid 0) or an
    accounting user with AdminLevel=Administrator (in ``state``'s accounting domain)."""
    return is_admin(ident, state)


def _caller(context: CallContext) -> Identity:
    """The verified caller (see ``spur.auth.callers.caller``)."""
    from spur.auth.callers import caller as verified_caller

    return verified_caller(context)


# Reads are linearizable (ReadIndex barrier on the leader); followers forward everything.
_leader_only = served_by_leader(SERVICE, read_barrier=True)


def accounting_settings(ctl: ControllerHost) -> ConfigureAccounting:
    """The ``ConfigureAccounting`` command for the leader's configuration."""
    host, _, port = ctl.client_address.rpartition(":")
    return ConfigureAccounting(
        cluster=ctl.cfg.cluster_name,
        enforce=list(ctl.cfg.accounting.enforce),
        decay_half_life_secs=float(max(0, ctl.cfg.priority.decay_half_life_secs)),
        control_host=host,
        control_port=int(port) if port.isdigit() else 0,
    )


def _records(rows: list[dict[str, str]]) -> apb.AcctRecords:
    return apb.AcctRecords(records=[apb.AcctRecord(fields=row) for row in rows])


class AccountingService:
    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    @property
    def domain(self) -> AccountingDomain:
        return self.ctl.state.domains["accounting"]  # type: ignore[return-value]

    @_leader_only
    async def Change(self, request: apb.AcctChangeRequest, context: CallContext) -> apb.AcctChangeResponse:
        ident = _caller(context)
        if not may_administer(ident, self.ctl.state):  # before looking at the request: refusals reveal nothing
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                " Your user doesn't have privilege to perform this action",
            )
        if request.entity not in ENTITIES:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"No valid entity in {request.op} command")
        where, values = dict(request.where), dict(request.values)
        if request.op == "add":
            cmd: AcctAdd | AcctModify | AcctDelete = AcctAdd(request.entity, list(request.names), values)
        elif request.op == "modify":
            cmd = AcctModify(request.entity, where, values)
        elif request.op == "delete":
            cmd = AcctDelete(request.entity, where)
        else:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"unknown accounting operation {request.op!r}")
        lines = await self.ctl.propose(cmd)
        self.ctl.kick_scheduler()  # a raised limit may let a pending job start now
        return apb.AcctChangeResponse(lines=lines)

    @_leader_only
    async def Show(self, request: apb.AcctShowRequest, context: CallContext) -> apb.AcctRecords:
        _caller(context)
        if request.entity not in ENTITIES:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "No valid entity in list command")
        return _records(self.domain.records(request.entity, with_assoc=request.with_assoc))

    @_leader_only
    async def Shares(self, request: apb.SharesRequest, context: CallContext) -> apb.AcctRecords:
        _caller(context)
        from spur.accounting.shares import share_records

        rows = share_records(
            self.domain,
            self.ctl.clock.wall(),
            accounts=list(request.accounts),
            users=list(request.users),
            all_users=request.all_users,
        )
        return _records(rows)

    @_leader_only
    async def Priorities(self, request: apb.PrioritiesRequest, context: CallContext) -> apb.AcctRecords:
        _caller(context)
        from spur.accounting.shares import priority_records, weights_of

        rows = priority_records(
            self.ctl.state,
            self.domain,
            weights_of(self.ctl.cfg.priority),
            self.ctl.clock.wall(),
            job_ids=[int(i) for i in request.job_ids],
            users=list(request.users),
        )
        return _records(rows)
