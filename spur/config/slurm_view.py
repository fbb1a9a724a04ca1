"""A controller's configuration as ``scontrol show config`` rows, under Slurm's names. Pure: no I/O.

Only settings Slurm has a name for are shown, formatted as Slurm 22.05 prints them (``90 sec``,
``7-00:00:00``). Secrets (``auth.jwt_key``, ``accounting.database_url``'s password, join tokens)
are never part of a row. The accounting storage rows come from the accounting service instead
(``spur.cli.sdiag.config_rows``).
"""

from __future__ import annotations

from spur.config.model import SpurConfig

__all__ = ["slurm_rows"]


def _g(value: float) -> str:
    return f"{value:g}"


def slurm_rows(cfg: SpurConfig, config_file: str = "", state_dir: str = "") -> list[tuple[str, str]]:
    """``(key, value)`` rows for ``cfg``, sorted by key; ``config_file`` is shown as ``SLURM_CONF``,
    ``state_dir`` (the directory in use, when a flag overrode the file's) as ``StateSaveLocation``.
    ``SpurdHeartbeatInterval`` is Spur's own (Slurm has no agent heartbeat setting)."""
    s, c, p = cfg.scheduler, cfg.controller, cfg.priority
    enforce = ",".join(cfg.accounting.enforce) or "none"
    rows = [
        ("AccountingStorageEnforce", enforce),
        ("EnforcePartLimits", s.enforce_part_limits),
        ("KillWait", f"{c.kill_grace_secs} sec"),
        ("MpiDefault", c.mpi_default),
        ("PriorityDecayHalfLife", p.decay_half_life),
        ("PriorityMaxAge", p.max_age),
        ("PriorityType", "priority/multifactor"),
        ("PriorityWeightAge", str(p.weight_age)),
        ("PriorityWeightFairShare", str(p.weight_fairshare)),
        ("PriorityWeightJobSize", str(p.weight_job_size)),
        ("PriorityWeightPartition", str(p.weight_partition)),
        ("PriorityWeightQOS", str(p.weight_qos)),
        ("SLURM_CONF", config_file or "(null)"),
        ("SchedulerParameters", f"bf_max_job_test={s.max_job_test},sched_interval={_g(s.interval_secs)}"),
        ("SchedulerType", f"sched/{s.plugin}"),
        ("SlurmdTimeout", f"{c.node_timeout_secs} sec"),
        ("SpurdHeartbeatInterval", f"{c.heartbeat_interval_secs} sec"),
        ("StateSaveLocation", str(state_dir or c.state_dir)),
    ]
    return sorted(rows)
