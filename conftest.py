"""Plugins for every test run from this repository (tests/ and integration/)."""

import os

# Kills whatever the session started and left running (integration/reaper.py).
pytest_plugins = ["integration.reaper"]

# Every controller the tests run, in this process or as spurctld, decodes the entries it applies as
# proposed too and fails the proposal when the object differs from its decoding
# (ClusterState.verify_proposed): the suites check every command they make a leader build.
os.environ["SPUR_VERIFY_PROPOSED"] = "1"
