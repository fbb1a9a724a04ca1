"""``spur.config.v1.ConfigReport``: the configuration this controller runs with (``scontrol show config``).

Served by every controller from its own configuration, never forwarded: the leader shows what
``scontrol reconfigure`` applied; a follower shows the file as it read it at start (or when it last
led). Rows come from the pure ``spur.config.slurm_view.slurm_rows`` and hold no secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spur.config.slurm_view import slurm_rows
from spur.rpc.proto import config_report_pb2 as cpb
from spur.rpc.server import CallContext

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

SERVICE = cpb.DESCRIPTOR.services_by_name["ConfigReport"]


class ConfigReportService:
    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    async def GetEffectiveConfig(
        self, request: cpb.EffectiveConfigRequest, context: CallContext
    ) -> cpb.EffectiveConfig:
        ctl = self.ctl
        path = str(ctl.config_path) if ctl.config_path is not None else ""
        rows = slurm_rows(ctl.cfg, path, state_dir=str(ctl.state_dir))
        return cpb.EffectiveConfig(
            node_id=ctl.node_id,
            role=str(ctl.raft.role),
            config_file=path,
            loaded_at=ctl.config_loaded_at,
            rows=[cpb.ConfigRow(key=k, value=v) for k, v in rows],
        )
