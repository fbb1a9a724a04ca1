"""Re-export of :mod:`spur.rpc.convert` for the controller's own modules.

The conversion lives in the wire layer so that clients never import :mod:`spur.controller`;
new code imports it from :mod:`spur.rpc.convert`.
"""

from spur.rpc.convert import (
    allocation_from_proto,
    allocation_to_proto,
    gpu_from_proto,
    gpu_to_proto,
    job_to_proto,
    node_from_register,
    partition_to_proto,
    spec_from_proto,
    spec_to_proto,
    step_spec_from_proto,
    step_spec_to_proto,
    step_to_proto,
)

__all__ = [
    "allocation_from_proto",
    "allocation_to_proto",
    "gpu_from_proto",
    "gpu_to_proto",
    "job_to_proto",
    "node_from_register",
    "partition_to_proto",
    "spec_from_proto",
    "spec_to_proto",
    "step_spec_from_proto",
    "step_spec_to_proto",
    "step_to_proto",
]
