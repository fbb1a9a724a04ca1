"""Calls to the controller's ``spur.v1.Accounting`` service from the CLI (sacctmgr, sshare, sprio)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spur.cli.client import with_controller

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub
    from spur.rpc.proto import accounting_pb2 as apb


def accounting_stub(controller_stub: ControllerStub) -> ControllerStub:
    """A stub for the Accounting service on the channel of ``controller_stub`` (blocking or Trio)."""
    from spur.cli.client import service_stub
    from spur.rpc.proto import accounting_pb2 as apb

    return service_stub(controller_stub, apb.DESCRIPTOR.services_by_name["Accounting"])


def call_accounting(method: str, request: Any) -> Any:
    """One Accounting RPC against the first reachable controller (errors as ``CliError``)."""

    def body(stub: ControllerStub) -> Any:
        return getattr(accounting_stub(stub), method)(request, timeout=30.0)

    return with_controller(body)


def records(response: apb.AcctRecords) -> list[dict[str, str]]:
    """``AcctRecords`` as plain dicts."""
    return [dict(r.fields) for r in response.records]
