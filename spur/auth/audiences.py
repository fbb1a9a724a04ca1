"""Token audiences: what a credential may be used for (kept free of PyJWT for the CLI's cold start).

``client`` is a user (the CLI, REST, scripts; every token without ``aud``, such as real Slurm's);
``controller`` is spurctld calling agents and other controllers; ``agent`` is spurd and the Kubernetes
operator calling controllers; ``raft`` is the controllers' consensus messages. Only ``client``
credentials speak for a user or carry the admin claim.
"""

from __future__ import annotations

AUD_CLIENT = "client"
AUD_CONTROLLER = "controller"
AUD_AGENT = "agent"
AUD_RAFT = "raft"
AUDIENCES = frozenset({AUD_CLIENT, AUD_CONTROLLER, AUD_AGENT, AUD_RAFT})
DAEMON_AUDIENCES = frozenset({AUD_CONTROLLER, AUD_AGENT, AUD_RAFT})
