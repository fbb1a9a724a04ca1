"""The state domains ``ClusterState`` composes, in a fixed order (snapshot and notification order).

Add a domain by appending its class here; see ``spur.state.domain`` for the contract.
"""

from __future__ import annotations

from spur.state.accounting import AccountingDomain
from spur.state.admission import AdmissionDomain
from spur.state.domain import StateDomain
from spur.state.job_stats import JobStats
from spur.state.k8s_cluster import K8sClusterDomain
from spur.state.mesh import MeshDomain
from spur.state.outbox import OutboxDomain
from spur.state.revocation import RevocationDomain

DOMAINS: list[type[StateDomain]] = [
    AdmissionDomain,
    AccountingDomain,
    JobStats,
    OutboxDomain,
    MeshDomain,
    K8sClusterDomain,
    RevocationDomain,
]
