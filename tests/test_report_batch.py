"""Final job reports in one ``ReportJobStatuses`` call (``spur.controller.batch_service``).

A call's reports are checked one by one as ``ReportJobStatus`` checks them, and every accepted one is
proposed in a single ``propose_many``, in the reports' order. A report that does not parse, comes
from a node without a valid credential, or whose command the state refuses fails on its own; a
report of another cluster's job is acknowledged and records nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import trio

from spur.config import parse_config_text
from spur.controller.batch_service import ControllerBatchService
from spur.controller.service import ControllerService
from spur.core.admission import CREDENTIAL_METADATA_KEY, hash_secret
from spur.rpc.proto import batch_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state.admission import AdmitNode, CreateAdmissionToken
from spur.state.machine import ClusterState

METHOD = "/spur.batch.v1.ControllerBatch/ReportJobStatuses"


@dataclass
class _Ctl:
    """What the report path reads of the controller: its state, config, clock and proposals."""

    state: ClusterState
    cfg: Any
    refuse: set[int] = field(default_factory=set)
    proposals: list[list[Any]] = field(default_factory=list)
    kicks: int = 0
    is_leader: bool = True
    clock: Any = field(default_factory=lambda: SimpleNamespace(wall=lambda: 1000.0))

    async def leader_ready(self) -> None:
        await trio.lowlevel.checkpoint()

    async def propose_many(self, cmds: list[Any]) -> list[Any]:
        self.proposals.append(list(cmds))
        await trio.lowlevel.checkpoint()
        return [
            RpcError(StatusCode.FAILED_PRECONDITION, f"job {cmd.job_id} is not running")
            if cmd.job_id in self.refuse
            else None
            for cmd in cmds
        ]

    def kick_scheduler(self) -> None:
        self.kicks += 1


def _ctl(conf: str = "", refuse: Collection[int] = ()) -> _Ctl:
    state = ClusterState()
    state.apply_command(c.InitClusterId("ours"))
    return _Ctl(state=state, cfg=parse_config_text(conf), refuse=set(refuse))


def _report(job_id: int, node: str = "n1", **kw: Any) -> bytes:
    return pb.JobStatusReport(job_id=job_id, node=node, end_time=5.0, **kw).SerializeToString()


async def _call(ctl: _Ctl, raws: list[bytes], metadata: dict[str, str] | None = None) -> batch_pb2.BatchOutcomes:
    service = ControllerBatchService(ControllerService(ctl))  # type: ignore[arg-type]  # the fake has what reports read
    request = batch_pb2.JobStatusReports(reports=raws)
    return await service.ReportJobStatuses(request, CallContext(METHOD, metadata or {}, "127.0.0.1:1", None))


async def test_a_calls_reports_leave_in_one_proposal_in_their_order() -> None:
    ctl = _ctl()
    out = await _call(ctl, [_report(3), _report(1, step_id=0), _report(2, exit_code=1)])
    assert [o.code for o in out.outcomes] == [0, 0, 0]
    [proposal] = ctl.proposals
    assert [type(cmd) for cmd in proposal] == [c.JobExited, c.StepExited, c.JobExited]
    assert [cmd.job_id for cmd in proposal] == [3, 1, 2]
    assert proposal[2].exit_code == 1 and proposal[0].end_time == 5.0
    assert ctl.kicks == 2  # once per job that ended, none for the step


async def test_a_report_that_does_not_parse_or_is_refused_fails_alone() -> None:
    ctl = _ctl(refuse={2})
    out = await _call(ctl, [_report(1), b"\xff\xff\xff", _report(2), _report(4)])
    codes = [o.code for o in out.outcomes]
    assert codes == [0, StatusCode.INVALID_ARGUMENT.value, StatusCode.FAILED_PRECONDITION.value, 0]
    assert out.outcomes[1].message.startswith("item 1 does not parse")
    assert out.outcomes[2].message == "job 2 is not running"
    assert [[cmd.job_id for cmd in p] for p in ctl.proposals] == [[1, 2, 4]]
    assert ctl.kicks == 2


async def test_another_clusters_job_is_acknowledged_and_records_nothing() -> None:
    ctl = _ctl()
    out = await _call(ctl, [_report(7, cluster_id="theirs"), _report(8, cluster_id="ours")])
    assert [o.code for o in out.outcomes] == [0, 0]
    assert [[cmd.job_id for cmd in p] for p in ctl.proposals] == [[8]]
    out = await _call(ctl, [_report(9, cluster_id="theirs")])
    assert [o.code for o in out.outcomes] == [0]
    assert len(ctl.proposals) == 1  # nothing to propose: no proposal at all


async def test_in_token_mode_a_node_reports_only_with_its_own_credential() -> None:
    """A node holding a valid credential cannot slip another node's reports into its call."""
    ctl = _ctl("[admission]\nmode = \"token\"\n")
    admission = ctl.state.domains["admission"]
    assert admission.apply(CreateAdmissionToken("123456", hash_secret("join"), 0.0, 1e12, None, "root"))
    assert admission.apply(AdmitNode("n1", "123456", hash_secret("join"), hash_secret("cred-n1"), 1.0)) is True
    raws = [_report(1, node="n1"), _report(2, node="n2"), _report(3, node="n1")]
    out = await _call(ctl, raws, {CREDENTIAL_METADATA_KEY: "cred-n1"})
    assert [o.code for o in out.outcomes] == [0, StatusCode.PERMISSION_DENIED.value, 0]
    assert "job report from node n2 refused" in out.outcomes[1].message
    assert [[cmd.job_id for cmd in p] for p in ctl.proposals] == [[1, 3]]
    out = await _call(ctl, raws, {CREDENTIAL_METADATA_KEY: "stolen-guess"})
    assert all(o.code == StatusCode.PERMISSION_DENIED.value for o in out.outcomes)
    assert len(ctl.proposals) == 1
