"""Slurm's multifactor job priority (pure).

``priority = w_age*age + w_fairshare*fairshare + w_job_size*job_size + w_partition*partition
+ w_qos*qos - nice`` where every factor is in [0, 1]:

- age: time since the job became eligible, over ``max_age`` (capped at 1);
- fairshare: the association's factor from :mod:`spur.accounting.fairshare`;
- job_size: requested CPUs over the cluster's CPUs (favouring large jobs, Slurm's default);
- partition: 1.0 (Spur partitions have no PriorityJobFactor yet, so all partitions weigh the same);
- qos: the QOS priority over the largest QOS priority (0 when every QOS has priority 0).

With every weight 0 the plugin is off and the basic priority stays (see ``active``).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_AGE_SECS = 7 * 86400


@dataclass(frozen=True)
class PriorityWeights:
    age: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0
    max_age_secs: int = DEFAULT_MAX_AGE_SECS

    @property
    def active(self) -> bool:
        """Whether multifactor priority is in use (some weight is non-zero)."""
        return any((self.age, self.fairshare, self.job_size, self.partition, self.qos))


@dataclass(frozen=True)
class PriorityFactors:
    age: float
    fairshare: float
    job_size: float
    partition: float
    qos: float
    nice: int = 0

    def weighted(self, w: PriorityWeights) -> dict[str, int]:
        """Each factor times its weight, rounded as sprio prints them."""
        return {
            "age": round(w.age * self.age),
            "fairshare": round(w.fairshare * self.fairshare),
            "job_size": round(w.job_size * self.job_size),
            "partition": round(w.partition * self.partition),
            "qos": round(w.qos * self.qos),
        }

    def priority(self, w: PriorityWeights) -> int:
        """The job priority (at least 1: 0 means held)."""
        return max(1, sum(self.weighted(w).values()) - self.nice)


def job_factors(
    *,
    eligible_time: float,
    now: float,
    max_age_secs: int,
    fairshare: float,
    cpus: int,
    cluster_cpus: int,
    qos_priority: int,
    max_qos_priority: int,
    nice: int = 0,
) -> PriorityFactors:
    """The factors of one pending job (see the module docstring)."""
    age = 0.0
    if max_age_secs > 0:
        age = min(1.0, max(0.0, now - eligible_time) / max_age_secs)
    size = min(1.0, cpus / cluster_cpus) if cluster_cpus > 0 else 0.0
    qos = qos_priority / max_qos_priority if max_qos_priority > 0 else 0.0
    return PriorityFactors(
        age=age,
        fairshare=max(0.0, min(1.0, fairshare)),
        job_size=size,
        partition=1.0,
        qos=max(0.0, min(1.0, qos)),
        nice=nice,
    )
