"""Spur-managed k0s: rendering, planning, install, agent and controller glue."""
