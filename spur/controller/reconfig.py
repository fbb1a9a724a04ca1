"""``scontrol reconfigure`` on spurctld: which keys a re-read file changes in a running controller.

The leader re-reads its file and applies the keys ``spur.config.applies`` marks live; every other
changed key is named back to the caller as needing a restart (``restart_needed``). Followers do not
reconfigure: the call is forwarded to the leader (``ControllerService.Reconfigure``), and a follower
reads its file again when it restarts or becomes leader (:func:`reread_for_leadership`), so with one
file every controller converges on it.

:func:`apply_live` is pure; the async functions do the file read and the proposals.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spur.config.applies import Applies, mark_of, restart_needed
from spur.config.model import SpurConfig
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

__all__ = ["Outcome", "apply_live", "load_for_reconfigure", "reread_for_leadership"]

log = logging.getLogger("spur.controller.reconfig")

APPLIED_SECTIONS = [
    "scheduler",
    "partitions",
    "controller.node_timeouts",
    "accounting.enforce",
    "priority",
    "cluster.k8s_drift_correction",
]
"""What a reconfigure reports as applied (the sections holding live keys)."""


@dataclass(frozen=True)
class Outcome:
    """A reconfigure's result: the configuration to run with, and the changed keys it could not apply."""

    cfg: SpurConfig
    applied: list[str]
    not_applied: list[str]


class PluginChanged(ValueError):
    """The re-read file names another scheduler plugin (loaded once, at start)."""


def apply_live(running: SpurConfig, new: SpurConfig) -> SpurConfig:
    """``running`` with the live keys of ``new``: [scheduler], [[partitions]], [priority],
    ``accounting.enforce``, ``cluster.k8s_drift_correction`` (the drift sweep reads it on every tick)
    and the controller's node heartbeat, timeout and kill grace.
    Raises :class:`PluginChanged` when ``scheduler.plugin`` differs."""
    if new.scheduler.plugin != running.scheduler.plugin:
        raise PluginChanged("scheduler.plugin cannot change while running; restart spurctld")
    controller = replace(
        running.controller,
        heartbeat_interval_secs=new.controller.heartbeat_interval_secs,
        node_timeout_secs=new.controller.node_timeout_secs,
        kill_grace_secs=new.controller.kill_grace_secs,
    )
    accounting = replace(running.accounting, enforce=new.accounting.enforce)
    cluster = replace(running.cluster, k8s_drift_correction=new.cluster.k8s_drift_correction)
    return replace(
        running,
        scheduler=new.scheduler,
        partitions=new.partitions,
        priority=new.priority,
        controller=controller,
        accounting=accounting,
        cluster=cluster,
    )


def _needs_controller_restart(running: SpurConfig, new: SpurConfig) -> list[str]:
    """Changed keys that this controller reads only at start (spurd-only keys are spurd's business)."""
    wanted = (Applies.SPURCTLD, Applies.BOTH)
    return [k for k in restart_needed(running, new) if mark_of(k.split(" ", 1)[0]).applies in wanted]


def load_for_reconfigure(ctl: ControllerHost) -> Outcome:
    """Re-read ``ctl``'s file; a missing file, a bad one or a changed plugin is an RpcError and
    changes nothing."""
    from spur.config import ConfigError, load_config

    if ctl.config_path is None:
        raise RpcError(StatusCode.FAILED_PRECONDITION, "spurctld was started without a config file (-f)")
    try:
        new = load_config(ctl.config_path, overrides=ctl._overrides)
    except ConfigError as exc:
        raise RpcError(StatusCode.INVALID_ARGUMENT, str(exc)) from None
    try:
        cfg = apply_live(ctl.cfg, new)
    except PluginChanged as exc:
        raise RpcError(StatusCode.FAILED_PRECONDITION, str(exc)) from None
    return Outcome(cfg=cfg, applied=list(APPLIED_SECTIONS), not_applied=_needs_controller_restart(ctl.cfg, new))


def reread_for_leadership(ctl: ControllerHost) -> None:
    """On becoming leader: take the live keys of the file as it is now (a follower may have started
    before the last reconfigure). A file that cannot be used is logged and the current settings kept."""
    if ctl.config_path is None:
        return
    try:
        outcome = load_for_reconfigure(ctl)
    except RpcError as exc:
        log.warning("leader keeps its configuration: re-reading %s failed: %s", ctl.config_path, exc.message)
        return
    if outcome.cfg != ctl.cfg:
        log.info("leader re-read %s: live settings changed since this controller read it", ctl.config_path)
    ctl.cfg = outcome.cfg
    ctl.config_loaded_at = ctl.clock.wall()
    if outcome.not_applied:
        log.warning("%s changed keys that need a restart: %s", ctl.config_path, ", ".join(outcome.not_applied))
