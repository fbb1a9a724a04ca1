"""spurctld's web dashboard, served under ``/ui/`` on the REST listener (``[rest] ui``).

Server-rendered HTML (Jinja2 templates shipped in this package), one small script for live updates over
server-sent events, SVG charts drawn on the server; nothing is fetched from elsewhere. Every read and
action is a ControllerService (or Accounting service) call made through the REST layer's
:class:`spur.rest.adapter.ServiceAdapter` with the signed-in user's credential, so the UI shows and
does exactly what the CLI would for that user. See docs/dashboard.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spur.rest.app import RestApi

__all__ = ["mount"]


def mount(api: RestApi) -> None:
    """Add the dashboard's routes, its request gate and its sampler to ``api``'s app."""
    from spur.ui.app import Dashboard

    Dashboard(api)
