"""Plugins for every test run from this repository (tests/ and integration/)."""

# Kills whatever the session started and left running (integration/reaper.py).
pytest_plugins = ["integration.reaper"]
