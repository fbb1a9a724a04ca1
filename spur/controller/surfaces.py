"""spurctld's HTTP surfaces beside gRPC: the REST API (``[rest]``, ``controller.rest_addr``) and the
Prometheus endpoint (``[metrics]``, ``controller.metrics_addr``), started in the root nursery.

Neither is needed to schedule: when its address cannot be bound (port in use, address not local),
the error is logged and spurctld keeps serving gRPC without it, as slurmctld runs without slurmrestd.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.controller.service import ControllerService
    from spur.metrics.controller import ControllerMetrics

log = logging.getLogger("spur.controller")


def _bind_error(exc: BaseException) -> OSError | None:
    """The OSError behind a failed bind, also when wrapped alone in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, OSError) else None


def make_metrics(ctl: ControllerHost) -> ControllerMetrics | None:
    """The controller's metrics (None when ``[metrics] enabled = false``)."""
    if not ctl.cfg.metrics.enabled:
        return None
    from spur.metrics.controller import ControllerMetrics

    return ControllerMetrics(ctl)


async def start_surfaces(ctl: ControllerHost, nursery: trio.Nursery, service: ControllerService) -> None:
    """Start REST and metrics in ``nursery`` (each only if enabled); sets ``ctl.rest_port`` and
    ``ctl.metrics_port`` to the bound ports (None when not serving)."""
    from spur.config import parse_addr

    if ctl.cfg.rest.enabled:
        from spur.rest.app import RestApi, serve_rest
        from spur.rest.limits import Limits

        rest = ctl.cfg.rest
        limits = Limits(rest.max_body_bytes, rest.max_json_depth, rest.max_string_length)
        api = RestApi(ctl, service, limits)
        from spur.rest.routes_v004x import register_all

        register_all(api)  # slurmrestd v0.0.40-42 beside v0.0.38
        if rest.ui:
            from spur.ui import mount

            mount(api)  # the web dashboard under /ui/ (spur.ui), on the REST listener
        host, port = parse_addr(ctl.cfg.controller.rest_addr, 6820)
        try:
            ctl.rest_port = await nursery.start(partial(serve_rest, tls=ctl.tls), api, host, port)
            from spur.rest.prerender import JobsPrerender

            ahead = JobsPrerender(api.job_caches, lambda: api.cluster, service.listed_jobs, service.job_infos.framed,
                                  ctl.wait_change, lambda: api.listings > 0, named=rest.prerender_versions,
                                  leadership=service.leadership)  # fmt: skip
            api.on_jobs_listed = ahead.listing
            await nursery.start(ahead.run, name="rest-prerender")
        except BaseException as exc:
            err = _bind_error(exc)
            if err is None:
                raise
            log.error("REST API not served: cannot listen on %s:%s: %s", host, port, err)
    if ctl.metrics is not None:
        from spur.metrics.http import serve_metrics

        addr = ctl.cfg.metrics.bind or ctl.cfg.controller.metrics_addr
        host, port = parse_addr(addr, 6822)
        try:
            ctl.metrics_port = await nursery.start(serve_metrics, ctl.metrics.registry, host, port)
        except BaseException as exc:
            err = _bind_error(exc)
            if err is None:
                raise
            log.error("metrics not served: cannot listen on %s:%s: %s", host, port, err)
