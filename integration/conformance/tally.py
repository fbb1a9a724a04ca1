"""The conformance results of this session, per command (filled by the tests, printed by conftest)."""

from __future__ import annotations

from collections import defaultdict

# command -> {"match": n, "allowed": n, "differ": n}
TALLY: dict[str, dict[str, int]] = defaultdict(lambda: {"match": 0, "allowed": 0, "differ": 0})
