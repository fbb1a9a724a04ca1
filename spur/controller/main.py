"""``spurctld`` entry point: parse flags, load config, run the controller until SIGINT/SIGTERM.

SIGHUP re-reads the ``[tls]`` certificate, key and CA files (for new connections); ``--init-tls DIR``
makes a cluster CA and this host's certificate there (as ``spur cert init``) and exits."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from collections.abc import Callable

import trio

from spur.sdnotify import notify
from spur.startup import EXIT_CONFIG, EXIT_STARTUP, startup_message


def build_parser() -> argparse.ArgumentParser:
    """spurctld's flags (also the option table of its man page, spurctld.8)."""
    p = argparse.ArgumentParser(
        prog="spurctld",
        description="Spur controller daemon",
        epilog="Exit codes: 0 stopped cleanly, 1 cannot start (port or state directory in use), "
        "2 bad flag, 78 configuration error.",
    )
    p.add_argument("-V", "--version", action="version", version=_version())
    p.add_argument("-D", "--foreground", action="store_true", help="run in the foreground (always the case)")
    p.add_argument(
        "-f",
        "--conf",
        "--config",
        dest="conf",
        help="spur.conf path (default: $SPUR_CONF, else built-in defaults)",
    )
    p.add_argument("--state-dir", help="directory for the Raft WAL and snapshots (controller.state_dir)")
    p.add_argument("--listen", help="gRPC listen address HOST:PORT (controller.listen_addr)")
    p.add_argument("--node-id", type=int, help="Raft node id (controller.node_id)")
    p.add_argument(
        "--init-tls",
        metavar="DIR",
        help="make a cluster CA and this host's certificate in DIR (spur cert init), print the [tls] lines, exit",
    )
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def _version() -> str:
    from spur.version import version_line

    return version_line()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.INFO,
        format="%(asctime)s spurctld %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    from spur.trace import enable_from_environment

    enable_from_environment()
    if args.init_tls:
        from pathlib import Path

        from spur.rpc.cert_setup import init_tls

        return init_tls(Path(args.init_tls))
    from spur.config import ConfigError, load_config, parse_addr, resolve_node_id
    from spur.plugins import PluginNotFound

    overrides = {}
    if args.state_dir:
        overrides["controller.state_dir"] = args.state_dir
    if args.listen:
        overrides["controller.listen_addr"] = args.listen
    if args.node_id is not None:
        overrides["controller.node_id"] = args.node_id
    try:
        cfg = load_config(args.conf, overrides=overrides)
        node_id = resolve_node_id(cfg, socket.gethostname())
        listen = parse_addr(cfg.controller.listen_addr, 6817)
    except ConfigError as exc:
        print(f"spurctld: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    from spur.auth.keys import AuthConfigError, load_settings
    from spur.controller.app import Controller
    from spur.plugins import load_plugin_manager
    from spur.rpc.tls import TlsConfigError, TlsContexts, load_tls_settings

    try:
        auth = load_settings(cfg.auth)
        tls = TlsContexts(load_tls_settings(cfg.tls), name="spurctld")
    except (AuthConfigError, TlsConfigError) as exc:
        print(f"spurctld: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    try:
        plugin_manager = load_plugin_manager("scheduler", cfg.scheduler.plugin)
        if cfg.cluster.enabled:
            from spur.k8s.cluster.plugins import load_cluster_plugins

            load_cluster_plugins(cfg.cluster)
    except PluginNotFound as exc:
        print(f"spurctld: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        controller = Controller(
            cfg,
            listen=listen,
            node_id=node_id,
            config_path=args.conf,
            overrides=overrides,
            auth=auth,
            tls=tls,
        )
    except Exception as exc:  # the state directory cannot be used (locked by another spurctld, unreadable)
        message = startup_message("spurctld", exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return EXIT_STARTUP
    controller.plugin_manager = plugin_manager

    async def run() -> None:
        from spur.controller.gc_policy import gc_policy
        from spur.controller.pacing import RunLoopPacer

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
            nursery.start_soon(_reload_on_sighup, controller.reload_tls)
            # Process-wide, so here and not in Controller.run (tests run several controllers in one process).
            await nursery.start(gc_policy, name="gc-policy")
            if cfg.controller.pace_linger_ms > 0:
                trio.lowlevel.add_instrument(
                    RunLoopPacer(
                        linger=cfg.controller.pace_linger_ms / 1000,
                        busy_threshold=cfg.controller.pace_busy_fraction,
                    )
                )
            await nursery.start(controller.run)
            notify("READY=1\nSTATUS=serving")

    try:
        trio.run(run)
    except BaseException as exc:  # a start-up failure inside the Trio run is one line, not a traceback
        message = startup_message("spurctld", exc)
        if message is None or isinstance(exc, KeyboardInterrupt):
            raise
        print(message, file=sys.stderr)
        return EXIT_STARTUP
    return 0


async def _stop_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            logging.getLogger("spur.controller").info("shutting down")
            notify("STOPPING=1")
            scope.cancel()
            return


async def _reload_on_sighup(reload: Callable[[], str | None]) -> None:
    """SIGHUP: re-read the TLS files (a failure is logged by the reload, the old ones stay in use)."""
    with trio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            logging.getLogger("spur.controller").info("SIGHUP: reloading the TLS certificates")
            reload()


if __name__ == "__main__":
    sys.exit(main())
