"""spurd: the node agent daemon (entry point ``spurd`` -> :func:`main`).

Startup order: discover hardware, re-adopt jobs left by an earlier agent, serve the Agent service,
then register with the controller (retrying while it is unreachable) and heartbeat. SIGTERM/SIGINT
stop the agent cleanly; running jobs are left running and are adopted by the next agent.

Settings come from flags, then ``--conf`` or ``$SPUR_CONF`` (spur.conf ``[agent]``), then built-in
defaults. A bad flag is one error message on stderr and exit code 2; a configuration file that cannot
be read or is invalid exits 78 (see :mod:`spur.startup`, the same codes as spurctld); a port or state
directory that cannot be used exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from spur.sdnotify import notify

if TYPE_CHECKING:
    from spur.agent.backends import Backend
    from spur.agent.discovery import NodeHardware
    from spur.auth.keys import AuthSettings
    from spur.config.model import AuthConfig, ClusterConfig, NetworkConfig, TlsConfig
    from spur.rpc.server import Server
    from spur.rpc.tls import TlsContexts

__all__ = ["AgentOptions", "main", "parse_args", "run_agent", "select_backend"]

log = logging.getLogger("spur.agent")

DEFAULT_CONTROLLER = "localhost:6817"
DEFAULT_LISTEN = "0.0.0.0:6818"
DEFAULT_STATE_DIR = Path("/var/lib/spur/agent")
VERSION = "0.1.0"


class UsageError(Exception):
    """A flag or config value is invalid; the message names it."""


class ConfigFileError(UsageError):
    """The configuration file cannot be read or is invalid (exit code ``spur.startup.EXIT_CONFIG``)."""


class StartupError(Exception):
    """The agent cannot start (port in use, unusable state dir); the message says why."""


@dataclass
class AgentOptions:
    controllers: list[str] = field(default_factory=lambda: [DEFAULT_CONTROLLER])
    listen_host: str = "0.0.0.0"
    listen_port: int = 6818
    name: str = ""
    address: str = ""
    state_dir: Path = DEFAULT_STATE_DIR
    cpus: int | None = None
    memory_mb: int | None = None
    sysfs_root: Path = Path("/")
    kill_grace: float = 30.0
    backend: str = "auto"
    heartbeat: float | None = None
    cluster_name: str = "spur"
    features: list[str] = field(default_factory=list)
    verbose: bool = False
    join_token: str = ""  # [admission] mode = "token": presented at registration; never logged
    # The config's [auth] section (None: built-in defaults); resolved into ``auth`` by main().
    auth_cfg: AuthConfig | None = None
    auth: AuthSettings | None = None
    # The config's [tls] section (None: TLS off); resolved into ``tls`` (spur.rpc.tls.TlsContexts) by main().
    tls_cfg: TlsConfig | None = None
    tls: TlsContexts | None = None
    metrics_addr: str | None = "127.0.0.1:6824"  # None: no metrics endpoint ([metrics] enabled = false)
    wg_interface: str = "spur0"  # [network]: the WireGuard mesh (spur net join)
    wg_port: int = 51820
    wg_endpoint: str | None = None  # IP:PORT other nodes reach this one at; None = detected
    # [cluster] and [network] when [cluster] enabled = true (spurd then owns the node's k0s unit).
    cluster_cfg: ClusterConfig | None = None
    network_cfg: NetworkConfig | None = None


def _parser() -> argparse.ArgumentParser:
    """spurd's flags (also the option table of its man page, spurd.8)."""
    from spur.version import version_line

    p = argparse.ArgumentParser(
        prog="spurd",
        description="Spur node agent",
        epilog="Exit codes: 0 stopped cleanly, 1 cannot start (port or state directory in use), "
        "2 bad flag, 78 configuration error. The configuration file is --conf, else $SPUR_CONF.",
    )
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-D", dest="foreground", action="store_true", help="run in the foreground (always)")
    p.add_argument("--controller", action="append", metavar="URL", help="controller address(es); repeatable")
    p.add_argument("--listen", metavar="HOST:PORT", help=f"agent gRPC address (default {DEFAULT_LISTEN})")
    p.add_argument("--port", type=int, metavar="N", help="agent gRPC port (overrides the --listen port)")
    p.add_argument("--name", help="node name (default: short hostname)")
    p.add_argument("--address", help="address the controller uses to reach this agent")
    p.add_argument("--state-dir", type=Path, help=f"agent state (default {DEFAULT_STATE_DIR})")
    p.add_argument("-f", "--conf", "--config", dest="conf", type=Path, help="spur.conf (default: $SPUR_CONF)")
    p.add_argument("--cpus", type=int, help="CPUs to offer (default: discovered)")
    p.add_argument("--memory-mb", type=int, help="memory in MiB to offer (default: discovered)")
    p.add_argument("--sysfs-root", type=Path, help="root of /proc and /sys for discovery (tests)")
    p.add_argument("--kill-grace", type=float, help="seconds between SIGTERM and SIGKILL (default 30)")
    p.add_argument("--backend", choices=["auto", "process", "systemd"], help="how jobs are started")
    p.add_argument("--heartbeat", type=float, metavar="SECS", help="heartbeat interval override")
    p.add_argument(
        "--metrics-addr",
        metavar="HOST:PORT",
        help="Prometheus metrics address (agent.metrics_addr; 'off' = none)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument(
        "--join-token",
        metavar="TOKEN",
        help="join token from `spur token create` (visible in ps: prefer the file)",
    )
    p.add_argument(
        "--wg-endpoint",
        metavar="IP[:PORT]",
        help="WireGuard endpoint other nodes use for this node (default: detected; [agent] wg_endpoint)",
    )
    p.add_argument(
        "--join-token-file", type=Path, metavar="PATH", help="file holding the join token (mode 0600)"
    )
    p.add_argument(
        "--features",
        action="append",
        metavar="A,B",
        help="node features, e.g. ib,zone=z1 (repeatable; default: this node's [[nodes]] features)",
    )
    return p


def _split_hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UsageError(f"invalid {what} {value!r}: expected HOST:PORT with a port from 0 to 65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def _load_config(path: Path) -> Any | None:
    try:
        from spur.config.loader import load_config
    except ImportError:
        log.warning("--conf %s ignored: spur.config is not available", path)
        return None
    from spur.config.errors import ConfigError

    try:
        return load_config(path)
    except ConfigError as e:
        raise ConfigFileError(str(e)) from None


def parse_args(argv: list[str] | None = None) -> AgentOptions:
    """Parse flags into options; raises UsageError for an invalid value (argparse errors exit 2)."""
    import os

    from spur.agent.controller_link import normalize_controller

    args = _parser().parse_args(argv)
    conf = args.conf or (Path(os.environ["SPUR_CONF"]) if os.environ.get("SPUR_CONF") else None)
    cfg = _load_config(conf) if conf else None
    agent_cfg = getattr(cfg, "agent", None)
    opts = AgentOptions()
    if cfg is not None:
        opts.cluster_name = cfg.cluster_name
        opts.kill_grace = float(cfg.controller.kill_grace_secs)
        opts.auth_cfg = cfg.auth
        opts.tls_cfg = cfg.tls
        if cfg.cluster.enabled:
            opts.cluster_cfg, opts.network_cfg = cfg.cluster, cfg.network

    raw_controllers = args.controller or (list(agent_cfg.controller) if agent_cfg else [DEFAULT_CONTROLLER])
    controllers: list[str] = []
    for item in raw_controllers:
        for part in item.split(","):
            if part.strip():
                try:
                    controllers.append(normalize_controller(part))
                except ValueError as e:
                    raise UsageError(f"--controller: {e}") from None
    if not controllers:
        raise UsageError("--controller: no controller address given")
    opts.controllers = controllers

    listen = args.listen or (agent_cfg.listen_addr if agent_cfg else DEFAULT_LISTEN)
    opts.listen_host, opts.listen_port = _split_hostport(listen, "--listen")
    if args.port is not None:
        if not 0 <= args.port < 65536:
            raise UsageError(f"invalid --port {args.port}: expected 0 to 65535")
        opts.listen_port = args.port

    opts.name = args.name or (agent_cfg.node_name if agent_cfg and agent_cfg.node_name else "")
    opts.name = opts.name or socket.gethostname().split(".")[0]
    if not opts.name or any(c.isspace() or c in ",[]" for c in opts.name):
        raise UsageError(f"invalid --name {opts.name!r}: a node name has no spaces, commas or brackets")
    from spur.agent.features import FeatureError, node_features

    try:
        opts.features = node_features(args.features, cfg.nodes if cfg is not None else (), opts.name)
    except FeatureError as e:
        raise UsageError(str(e)) from None
    opts.address = args.address or ""
    opts.state_dir = args.state_dir or (agent_cfg.state_dir if agent_cfg else DEFAULT_STATE_DIR)
    if args.cpus is not None and args.cpus < 1:
        raise UsageError(f"invalid --cpus {args.cpus}: must be at least 1")
    if args.memory_mb is not None and args.memory_mb < 1:
        raise UsageError(f"invalid --memory-mb {args.memory_mb}: must be at least 1")
    opts.cpus, opts.memory_mb = args.cpus, args.memory_mb
    if args.sysfs_root is not None:
        if not args.sysfs_root.is_dir():
            raise UsageError(f"invalid --sysfs-root {args.sysfs_root}: not a directory")
        opts.sysfs_root = args.sysfs_root
    if args.kill_grace is not None:
        if args.kill_grace < 0:
            raise UsageError(f"invalid --kill-grace {args.kill_grace}: must be 0 or more seconds")
        opts.kill_grace = args.kill_grace
    opts.backend = args.backend or (str(agent_cfg.backend) if agent_cfg else "auto")
    if args.heartbeat is not None and args.heartbeat <= 0:
        raise UsageError(f"invalid --heartbeat {args.heartbeat}: must be more than 0 seconds")
    opts.heartbeat = args.heartbeat
    opts.verbose = args.verbose
    from spur.agent.join_token import JoinTokenError, resolve_join_token

    try:
        opts.join_token = resolve_join_token(
            flag=args.join_token,
            flag_file=args.join_token_file,
            conf_token=agent_cfg.join_token if agent_cfg else None,
            conf_file=agent_cfg.join_token_file if agent_cfg else None,
        )
    except JoinTokenError as e:
        raise UsageError(str(e)) from None
    if cfg is not None:
        opts.metrics_addr = agent_cfg.metrics_addr if cfg.metrics.enabled and agent_cfg else None
    if cfg is not None:
        opts.wg_interface, opts.wg_port = cfg.network.wg_interface, cfg.network.wg_port
    raw_endpoint = args.wg_endpoint or (agent_cfg.wg_endpoint if agent_cfg else None)
    if raw_endpoint:
        from spur.net.endpoint import parse_endpoint_option

        try:
            opts.wg_endpoint = parse_endpoint_option(raw_endpoint, opts.wg_port)
        except ValueError as e:
            raise UsageError(f"invalid --wg-endpoint: {e}") from None
    if args.metrics_addr:
        opts.metrics_addr = None if args.metrics_addr == "off" else args.metrics_addr
        if opts.metrics_addr is not None:
            _split_hostport(opts.metrics_addr, "--metrics-addr")
    return opts


def select_backend(choice: str, *, euid: int | None = None, proc: Path = Path("/proc")) -> Backend:
    """The job backend spurd runs jobs with: ``auto`` picks systemd when systemd is PID 1, systemd-run exists and spurd is root."""
    from spur.agent import systemd
    from spur.agent.backends import ProcessBackend

    if choice == "process":
        return ProcessBackend()
    if choice == "systemd":
        return systemd.SystemdBackend()
    if choice != "auto":
        raise ValueError(f"unknown backend {choice!r} (expected auto, process or systemd)")
    euid = os.geteuid() if euid is None else euid
    if euid == 0 and systemd.systemd_is_pid1(proc) and systemd.systemd_run_path():
        return systemd.SystemdBackend()
    return ProcessBackend()


async def run_agent(
    opts: AgentOptions,
    hardware: NodeHardware | None = None,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the agent until cancelled; reports the bound agent port via ``task_status``.

    ``hardware`` defaults to discovering it under ``opts.sysfs_root``. Raises StartupError when the
    agent port cannot be bound or the state dir cannot be used.
    """
    from spur.agent.backends import BackendError
    from spur.agent.controller_link import local_address_towards, open_controller_link
    from spur.agent.discovery import discover
    from spur.agent.executor import SHIM_RECHECK_SECS, Executor, gpu_ordinals_from
    from spur.agent.join_token import CredentialKeeper
    from spur.agent.registration import Registrar
    from spur.agent.reporter import Reporter, report_key
    from spur.agent.service import AgentServicer
    from spur.auth.broker import serve_broker
    from spur.auth.guard import ServerAuth
    from spur.auth.keys import load_settings
    from spur.rpc.proto import spur_pb2
    from spur.rpc.server import Server

    if hardware is None:
        hardware = discover(opts.sysfs_root)
    cpus = opts.cpus or hardware.cpus.cpus
    memory_mb = opts.memory_mb or hardware.memory_mb
    backend = select_backend(opts.backend)
    cluster = {"name": opts.cluster_name}
    log.info(
        "spurd %s node %s: %d cpus, %d MiB, %d gpus, %s backend, state in %s",
        VERSION,
        opts.name,
        cpus,
        memory_mb,
        len(hardware.gpus),
        backend.name,
        opts.state_dir,
    )

    from spur.agent.revocations import VersionHint, follow_revocations
    from spur.auth.denylist import LearntDenyList

    denylist = LearntDenyList()  # learnt from the controllers: revoked tokens are refused here too
    revocation_hint = VersionHint()  # the deny-list version heartbeat answers announce
    auth = ServerAuth(
        opts.auth if opts.auth is not None else load_settings(opts.auth_cfg),
        daemon_name="spurd",
        daemon_audience="agent",
        denylist=denylist,
    )
    if opts.tls is None:
        from spur.rpc.tls import TlsContexts, load_tls_settings

        opts.tls = TlsContexts(load_tls_settings(opts.tls_cfg), name="spurd")
    async with (
        open_controller_link(
            opts.controllers, metadata_provider=auth.daemon_metadata, tls=opts.tls.client()
        ) as link,
        trio.open_nursery() as nursery,
    ):
        executor: Executor | None = None

        def acked(report: spur_pb2.JobStatusReport) -> None:
            assert executor is not None
            job_id, step_id = report_key(report)
            executor.mark_reported(job_id, step_id, cluster=report.cluster_id)

        reporter = Reporter(lambda r: link.call("ReportJobStatus", r), acked)
        if auth.settings.has_key:
            await nursery.start(follow_revocations, link.call, denylist, revocation_hint)
        credentials = CredentialKeeper(opts.state_dir, link.metadata)
        executor = Executor(
            state_dir=opts.state_dir,
            node_name=opts.name,
            backend=backend,
            on_final=reporter.submit,
            kill_grace=opts.kill_grace,
            gpu_ordinals=gpu_ordinals_from(hardware.gpus),
            cluster_name=lambda: cluster["name"],
            shim_recheck_secs=SHIM_RECHECK_SECS,
        )
        await nursery.start(reporter.run)
        try:
            await nursery.start(executor.run)
        except OSError as e:
            raise StartupError(f"cannot use state directory {opts.state_dir}: {e.strerror or e}") from None
        credentials.use(executor.cluster_id)

        metrics = None
        if opts.metrics_addr is not None:
            from spur.metrics.agent import AgentMetrics

            metrics = AgentMetrics(executor.jobs)

        server = Server(
            authenticator=auth, observer=metrics.observe_rpc if metrics is not None else None
        )

        async def lookup_job(job_id: int) -> spur_pb2.JobInfo | None:
            response = await link.call("GetJobs", spur_pb2.GetJobsRequest(job_ids=[job_id]))
            return next((j for j in response.jobs if j.job_id == job_id), None)

        agent_servicer = AgentServicer(executor, node_name=opts.name, lookup_job=lookup_job)
        server.add_service(spur_pb2.DESCRIPTOR.services_by_name["Agent"], agent_servicer)
        from spur.agent.batch_service import AGENT_BATCH, AgentBatchServicer

        server.add_service(  # LaunchJobs
            AGENT_BATCH,
            AgentBatchServicer(agent_servicer, metrics.observe_launch if metrics is not None else None),
        )
        from spur.agent.mesh import AGENT_SERVICE as MESH_AGENT_SERVICE
        from spur.agent.mesh import MeshAgent, MeshAgentServicer

        mesh = MeshAgent(
            node=opts.name,
            state_dir=opts.state_dir,
            ifname=opts.wg_interface,
            listen_port=opts.wg_port,
            endpoint=opts.wg_endpoint,
            call_controller=link.call,
            controller_target=lambda: link.current_target,
        )
        server.add_service(MESH_AGENT_SERVICE, MeshAgentServicer(mesh))
        if opts.cluster_cfg is not None:
            await _serve_k0s(server, opts, hardware)
        try:
            port = await nursery.start(
                partial(server.serve, tls=opts.tls.server()), opts.listen_host, opts.listen_port
            )
        except OSError as e:
            raise StartupError(
                f"cannot listen on {opts.listen_host}:{opts.listen_port}: {e.strerror or e}; "
                "stop the process holding that port (another spurd?) or choose another with --listen/--port"
            ) from None
        await nursery.start(serve_broker, auth, name="auth-broker")
        if metrics is not None and opts.metrics_addr is not None:
            from spur.metrics.http import serve_metrics

            m_host, m_port = _split_hostport(opts.metrics_addr, "--metrics-addr")
            try:
                await nursery.start(serve_metrics, metrics.registry, m_host, m_port)
            except OSError as e:  # metrics are optional: the node keeps running jobs without them
                log.error("metrics not served: cannot listen on %s: %s", opts.metrics_addr, e.strerror or e)

        async def build_request() -> spur_pb2.RegisterNodeRequest:
            address = opts.address or await local_address_towards(link.current_target)
            return spur_pb2.RegisterNodeRequest(
                name=opts.name,
                address=address,
                port=port,
                cpus=cpus,
                memory_mb=memory_mb,
                gpus=[
                    spur_pb2.GpuDevice(index=g.index, vendor=g.vendor, model=g.model, pci_bus_id=g.pci_bus_id)
                    for g in hardware.gpus
                ],
                running_job_ids=executor.running_job_ids(),
                version=VERSION,
                boot_time=hardware.boot_time,
                sockets=hardware.cpus.sockets,
                cores_per_socket=hardware.cpus.cores_per_socket,
                threads_per_core=hardware.cpus.threads_per_core,
                arch=hardware.arch,
                os=hardware.os,
                features=opts.features,
                comment=backend.limits_note,
                join_token=opts.join_token,
            )

        def registered(response: spur_pb2.RegisterNodeResponse) -> None:
            if response.cluster_name:
                cluster["name"] = response.cluster_name
            if response.cluster_id:
                try:
                    executor.use_cluster(response.cluster_id)
                except BackendError as e:
                    log.error("%s", e)
            credentials.registered(response.cluster_id, response.node_credential)

        registrar = Registrar(
            link.call,
            build_request=build_request,
            running_job_ids=executor.running_job_ids,
            unreported_job_ids=executor.unreported_job_ids,
            node_name=opts.name,
            heartbeat_override=opts.heartbeat,
            on_registered=registered,
            on_heartbeat=lambda answer: revocation_hint.announce(answer.revocation_version),
        )
        await nursery.start(registrar.run)
        await nursery.start(mesh.rejoin, name="mesh-rejoin")
        task_status.started(port)


async def _serve_until_signalled(opts: AgentOptions, hardware: NodeHardware) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:

            async def agent() -> None:
                async with trio.open_nursery() as inner:
                    port = await inner.start(run_agent, opts, hardware)
                    notify(f"READY=1\nSTATUS=serving on port {port}")
                nursery.cancel_scope.cancel()

            nursery.start_soon(agent)
            async for signum in signals:
                if signum == signal.SIGHUP:  # re-read the TLS files for new connections
                    log.info("received SIGHUP: reloading the TLS certificates")
                    if opts.tls is not None:
                        opts.tls.reload()
                    continue
                log.info(
                    "received %s: shutting down (running jobs keep running)", signal.Signals(signum).name
                )
                notify("STOPPING=1")
                nursery.cancel_scope.cancel()
                break


async def _serve_k0s(server: Server, opts: AgentOptions, hardware: NodeHardware) -> None:
    """[cluster] enabled: check root, re-adopt a k0s unit an earlier spurd left, serve K0sAgent."""
    from spur.agent.k0s import K0sError, K0sManager, require_root
    from spur.agent.k0s_service import K0sServicer
    from spur.rpc.proto import k0s_pb2

    try:
        require_root()
    except K0sError as e:
        raise StartupError(str(e)) from None
    # the caller serves K0sAgent only with [cluster] enabled, which sets both sections
    assert opts.cluster_cfg is not None and opts.network_cfg is not None
    manager = K0sManager(opts.cluster_cfg, opts.network_cfg, hardware.gpus)
    try:
        await manager.readopt()
    except K0sError as e:
        log.warning("k0s unit not re-adopted: %s", e)
    server.add_service(k0s_pb2.DESCRIPTOR.services_by_name["K0sAgent"], K0sServicer(manager, opts.name))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s spurd[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    from spur.startup import EXIT_CONFIG, EXIT_USAGE

    try:
        opts = parse_args(argv)
    except UsageError as e:
        print(f"spurd: error: {e}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(e, ConfigFileError) else EXIT_USAGE
    if opts.verbose:
        logging.getLogger().setLevel(logging.DEBUG)
    from spur.trace import enable_from_environment

    enable_from_environment()
    from spur.auth.keys import AuthConfigError, load_settings
    from spur.rpc.tls import TlsConfigError, TlsContexts, load_tls_settings

    try:
        opts.auth = load_settings(opts.auth_cfg)
        opts.tls = TlsContexts(load_tls_settings(opts.tls_cfg), name="spurd")
    except (AuthConfigError, TlsConfigError) as e:
        print(f"spurd: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    from spur.agent.discovery import DiscoveryError, discover

    try:
        hardware = discover(opts.sysfs_root)
    except DiscoveryError as e:
        print(f"spurd: error: hardware discovery failed: {e}", file=sys.stderr)
        return 1
    rc = 0
    try:
        trio.run(_serve_until_signalled, opts, hardware)
    except* KeyboardInterrupt:
        pass
    except* StartupError as group:
        for exc in _leaves(group):
            print(f"spurd: error: {exc}", file=sys.stderr)
        rc = 1
    log.info("spurd stopped")
    return rc


if __name__ == "__main__":
    sys.exit(main())
