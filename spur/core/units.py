"""Constants shared by the domain modules that must stay cheap to import (the CLI's query path).

:mod:`spur.core.job` (dataclasses) and :mod:`spur.core.timespec` both re-export these.
"""

from __future__ import annotations

# A time limit of -1 means none (squeue and scontrol show ``UNLIMITED``).
UNLIMITED = -1
