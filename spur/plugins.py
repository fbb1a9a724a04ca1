"""Finding and loading the configured plugin of each kind through entry points."""

from __future__ import annotations

from importlib.metadata import entry_points

import pluggy

from spur.hookspecs import KIND_PACKAGE_PREFIX, KIND_SPECS, PROJECT


class PluginNotFound(Exception):
    """The configured plugin is not installed; the message names the pip package to install."""


def load_plugin_manager(kind: str, name: str) -> pluggy.PluginManager:
    """Return a PluginManager with only the ``kind`` plugin called ``name`` registered."""
    if kind not in KIND_SPECS:
        raise ValueError(f"unknown plugin kind {kind!r}")
    wanted = f"{kind}.{name}"
    found = [ep for ep in entry_points(group=PROJECT) if ep.name == wanted]
    if not found:
        package = f"{KIND_PACKAGE_PREFIX[kind]}{name}"
        raise PluginNotFound(
            f"{kind} plugin {name!r} is not installed (no entry point {wanted!r} in group {PROJECT!r}); "
            f"install it with: pip install {package}"
        )
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(KIND_SPECS[kind])
    pm.register(found[0].load(), name=wanted)
    return pm
