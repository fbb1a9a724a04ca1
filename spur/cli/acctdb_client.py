"""Client side of the ``spur.acctdb.v1.AccountingDb`` service (sacct, sreport, sdiag, scontrol).

Bodies passed to :func:`spur.cli.client.with_controller` get a Controller stub; :func:`acctdb_stub` turns
it into a stub of this service on the same connection (blocking or Trio, whichever the body runs on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub
    from spur.rpc.status import RpcError

__all__ = ["acctdb_stub", "no_database"]


def acctdb_stub(stub: ControllerStub) -> ControllerStub:
    """A stub for AccountingDb on ``stub``'s channel."""
    from spur.cli.client import service_stub
    from spur.rpc.proto import accounting_db_pb2 as apb

    return service_stub(stub, apb.DESCRIPTOR.services_by_name["AccountingDb"])


def no_database(exc: RpcError) -> bool:
    """True for errors meaning "no database here": not configured, or a controller without the service."""
    from spur.rpc.status import StatusCode

    return exc.code in (StatusCode.FAILED_PRECONDITION, StatusCode.UNIMPLEMENTED)
