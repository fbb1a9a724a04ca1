"""``spur-k8s-operator``: the cyclopts entry point and the wiring of the operator's parts.

Exit codes: 0 after SIGTERM/SIGINT; 2 for a bad flag; 78 for an unusable auth setting (``--auth-mode
required`` without a key) or no reachable Kubernetes API configuration; 1 when a port cannot be bound.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Annotated, Literal

import trio
from cyclopts import App, Parameter

if TYPE_CHECKING:
    from spur.rpc.tls import TlsContexts

__all__ = ["main", "OperatorOptions", "run_operator"]

log = logging.getLogger("spur.k8s.operator")


@dataclass
class OperatorOptions:
    controller: str = "http://spurctld.spur.svc.cluster.local:6817"
    listen: str = "[::]:6818"
    address: str = ""
    namespace: str | None = None
    auth_mode: str = "permissive"
    jwt_key: str | None = None
    enable_quota: bool = False
    health_addr: str | None = None
    kube_api: str | None = None
    kube_token_file: str | None = None
    kube_ca: str | None = None
    image: str = "spur:latest"
    pod_namespace: str = "default"
    node_selector: dict[str, str] = field(default_factory=dict)
    default_uid: int = 65534
    join_token: str = ""
    credential_secret: str = "spur/spur-node-credentials"
    resync_secs: float = 10.0
    poll_secs: float = 2.0
    quota_interval_secs: float = 30.0
    kill_grace_secs: int = 30
    connect_timeout: float = 10.0
    keepalive_interval: float = 10.0
    keepalive_timeout: float = 5.0
    request_timeout: float = 30.0
    # TLS ([tls] of spurctld/spurd, as flags): off, optional or required, and the node cert/key/CA files.
    tls_mode: str = "off"
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None


def tls_contexts(opts: OperatorOptions) -> TlsContexts:
    """The operator's spur.rpc.tls.TlsContexts from its flags; StartupError (78) naming the flag's file."""
    from pathlib import Path

    from spur.rpc.tls import TlsConfigError, TlsContexts, TlsSettings

    settings = TlsSettings(
        mode=opts.tls_mode,
        cert_file=Path(opts.tls_cert) if opts.tls_cert else None,
        key_file=Path(opts.tls_key) if opts.tls_key else None,
        ca_file=Path(opts.tls_ca) if opts.tls_ca else None,
    )
    try:
        return TlsContexts(settings, name="spur-k8s-operator")
    except TlsConfigError as exc:
        raise StartupError(str(exc).replace("tls.", "--tls-").replace("_file", ""), 78) from None


class StartupError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def split_hostport(value: str, what: str) -> tuple[str, int]:
    """``host:port`` / ``[v6]:port`` -> (host, port); ValueError naming ``what``."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{what} must be host:port, not {value!r}")
    return host.strip("[]"), int(port)


async def run_operator(
    opts: OperatorOptions,
    *,
    tls: TlsContexts | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run every part until cancelled; reports the virtual agent's bound port. ``tls``: the operator's
    spur.rpc.tls.TlsContexts (None: built from ``opts``)."""
    from spur.agent.controller_link import normalize_controller
    from spur.auth.guard import ServerAuth
    from spur.auth.identity import Identity, identity_metadata
    from spur.auth.keys import AuthSettings
    from spur.k8s.operator.agent import VirtualAgent
    from spur.k8s.operator.jobs import JobController
    from spur.k8s.operator.kube import KubeClient, KubeConfig
    from spur.k8s.operator.link import Bounds, open_link
    from spur.k8s.operator.metrics import OperatorMetrics
    from spur.k8s.operator.spurjobs import SpurJobIdentity
    from spur.k8s.operator.watcher import NodeWatcher
    from spur.rpc.proto import spur_pb2
    from spur.rpc.server import Server

    key = opts.jwt_key.encode() if opts.jwt_key else None
    if opts.auth_mode == "required" and not key:
        raise StartupError("--auth-mode required needs a key: pass --jwt-key or set SPUR_JWT_KEY", 78)
    try:
        kube_config = KubeConfig.resolve(
            opts.kube_api, opts.kube_token_file, os.environ, ca_file=opts.kube_ca
        )
        targets = [normalize_controller(t) for t in opts.controller.split(",") if t.strip()]
        if not targets:
            raise ValueError("--controller needs at least one address")
        target = targets[0]
        listen_host, listen_port = split_hostport(opts.listen, "--listen")
        secret_ns, _, secret_name = opts.credential_secret.rpartition("/")
        if not secret_ns or not secret_name:
            raise ValueError(f"--credential-secret must be namespace/name, not {opts.credential_secret!r}")
        secret_ref = (secret_ns, secret_name)
    except (ValueError, OSError) as exc:
        raise StartupError(str(exc), 78) from None
    if tls is None:
        tls = tls_contexts(opts)
    client_tls = tls.client()
    auth = ServerAuth(AuthSettings(mode=opts.auth_mode, key=key), daemon_name="spur-k8s-operator")
    operator_identity = identity_metadata(Identity(0, 0, "spur-k8s-operator", "root"))

    def daemon_metadata() -> dict[str, str]:
        # With the cluster key: an admin daemon token. Without one the controller trusts claimed
        # identities (auth.mode disabled/permissive), and the operator acts as uid 0, as root would.
        return auth.daemon_metadata() if key else dict(operator_identity)

    def admin_metadata() -> dict[str, str] | None:
        # Draining/resuming a node (UpdateNode) is an administrator's action and a daemon credential
        # (audience agent) is never an admin: the operator, a holder of the cluster key, signs those
        # calls with a one-minute admin user token of its own. Without a key it claims uid 0.
        if not key:
            return None
        token = auth.mint_for("spur-k8s-operator", 0, ttl_secs=60, admin=True, gid=0)
        return {"authorization": f"Bearer {token}"}

    def submit_metadata(who: SpurJobIdentity) -> dict[str, str]:
        ident = identity_metadata(Identity(who.uid, who.uid, who.user, who.user))
        if key:
            token = auth.mint_for(who.user, who.uid, ttl_secs=300, gid=who.uid)
            return {**ident, "authorization": f"Bearer {token}"}
        return ident

    bounds = Bounds(
        connect_timeout=opts.connect_timeout,
        keepalive_interval=opts.keepalive_interval,
        keepalive_timeout=opts.keepalive_timeout,
        request_timeout=opts.request_timeout,
    )
    metrics = OperatorMetrics()
    kube = KubeClient(kube_config)
    gpu_resources: dict[str, str] = {}
    cluster = {"name": "spur"}
    try:
        async with (
            open_link(
                "job-controller", targets, bounds, metadata_provider=daemon_metadata, tls=client_tls
            ) as job_link,
            open_link(
                "node-watcher", targets, bounds, metadata_provider=daemon_metadata, tls=client_tls
            ) as node_link,
            trio.open_nursery() as nursery,
        ):
            for link in (job_link, node_link):
                link.on_transport_error = metrics.transport_error
            agent = VirtualAgent(
                kube,
                send_report=lambda r: node_link.call(
                    spur_pb2.DESCRIPTOR.services_by_name["Controller"],
                    "ReportJobStatus",
                    r,
                    metadata=watcher.credential_metadata(r.node),
                ),
                default_namespace=opts.pod_namespace,
                default_image=opts.image,
                watch_namespace=opts.namespace,
                gpu_resources=gpu_resources,
                cluster_name=lambda: cluster["name"],
                resync=max(opts.resync_secs, 1.0),
            )
            advertised = opts.address

            server = Server(authenticator=auth, observer=metrics.observe_rpc)
            server.add_service(spur_pb2.DESCRIPTOR.services_by_name["Agent"], agent)
            try:
                port = await nursery.start(partial(server.serve, tls=tls.server()), listen_host, listen_port)
            except OSError as exc:
                raise StartupError(f"cannot listen on {opts.listen}: {exc.strerror or exc}") from None
            if advertised:
                agent_host, agent_port = (
                    split_hostport(advertised, "--address")
                    if ":" in advertised.strip("[]") and advertised.rsplit(":", 1)[1].isdigit()
                    else (advertised, port)
                )
            else:
                from spur.agent.controller_link import local_address_towards

                agent_host, agent_port = await local_address_towards(target), port
            watcher = NodeWatcher(
                kube,
                node_link,
                address=agent_host,
                port=agent_port,
                selector=opts.node_selector,
                running_on=agent.running_on,
                unreported_on=agent.unreported_on,
                gpu_resources=gpu_resources,
                join_token=opts.join_token,
                resync=max(opts.resync_secs * 30, 30.0),
                on_cluster_name=lambda name: cluster.__setitem__("name", name),
                credential_secret=secret_ref,
                admin_metadata=admin_metadata,
            )
            jobs = JobController(
                kube,
                job_link,
                namespace=opts.namespace,
                default_image=opts.image,
                default_uid=opts.default_uid,
                submit_metadata=submit_metadata,
                resync=opts.resync_secs,
                poll=opts.poll_secs,
                grace_secs=opts.kill_grace_secs,
            )
            metrics.bind(agent=agent, watcher=watcher, jobs=jobs)
            await nursery.start(agent.run)
            await nursery.start(watcher.run)
            await nursery.start(jobs.run)
            if opts.enable_quota:
                from spur.k8s.operator.quota_reconciler import QuotaReconciler

                reconciler = QuotaReconciler(
                    kube, job_link, gpu_resources=gpu_resources, interval=opts.quota_interval_secs
                )
                await nursery.start(reconciler.run)
            if opts.health_addr:
                from spur.metrics.http import serve_metrics

                try:
                    h_host, h_port = split_hostport(opts.health_addr, "--health-addr")
                    bound = await nursery.start(
                        lambda task_status: serve_metrics(
                            metrics.registry, h_host, h_port, routes=metrics.routes(), task_status=task_status
                        )
                    )
                except (OSError, ValueError) as exc:
                    raise StartupError(f"cannot serve --health-addr {opts.health_addr}: {exc}") from None
                log.info("health and metrics on http://%s:%d (/healthz, /readyz, /metrics)", h_host, bound)
            log.info(
                "spur-k8s-operator: virtual agent on %s:%d (advertised %s:%d), controller %s, auth mode %s%s",
                listen_host,
                port,
                agent_host,
                agent_port,
                ",".join(targets),
                opts.auth_mode,
                ", quotas on" if opts.enable_quota else "",
            )
            task_status.started(port)
    finally:
        with trio.CancelScope(shield=True):
            await kube.aclose()


async def _serve_until_signalled(opts: OperatorOptions) -> None:
    tls = tls_contexts(opts)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:

            async def operator() -> None:
                await run_operator(opts, tls=tls)

            nursery.start_soon(operator)
            async for signum in signals:
                if signum == signal.SIGHUP:  # re-read the TLS files for new connections
                    log.info("received SIGHUP: reloading the TLS certificates")
                    tls.reload()
                    continue
                log.info("received %s: shutting down (jobs' pods keep running)", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _app() -> App:
    app = App(
        name="spur-k8s-operator",
        help="Run Spur jobs on Kubernetes: SpurJob controller, node watcher, virtual agent, quotas.",
        version="0.1.0",
    )

    @app.default
    def operator(
        *,
        controller: Annotated[
            str, Parameter(help="spurctld address (http://host:port or host:port; several: comma-separated).")
        ] = ("http://spurctld.spur.svc.cluster.local:6817"),
        listen: Annotated[str, Parameter(help="Virtual-agent gRPC listen address.")] = "[::]:6818",
        address: Annotated[
            str, Parameter(help="Address (host or host:port) spurctld reaches the virtual agent at.")
        ] = "",
        namespace: Annotated[
            str | None, Parameter(help="Watch SpurJobs and pods in this namespace only (default: all).")
        ] = None,
        auth_mode: Annotated[
            Literal["disabled", "permissive", "required"],
            Parameter(help="Authentication of calls to the virtual agent."),
        ] = "permissive",
        jwt_key: Annotated[
            str | None, Parameter(help="The cluster's JWT signing key ([auth] jwt_key); env SPUR_JWT_KEY.")
        ] = None,
        enable_quota: Annotated[
            bool, Parameter(help="Per-account ResourceQuota/LimitRange from GrpTRES.")
        ] = False,
        health_addr: Annotated[
            str | None, Parameter(help="host:port serving /healthz, /readyz and /metrics.")
        ] = None,
        kube_api: Annotated[
            str | None, Parameter(help="Kubernetes API URL (default: in-cluster); env SPUR_KUBE_API.")
        ] = None,
        kube_token_file: Annotated[
            str | None, Parameter(help="Bearer token file (default: the service account's).")
        ] = None,
        kube_ca: Annotated[
            str | None,
            Parameter(help="CA certificate (PEM) of the Kubernetes API (default: the service account's)."),
        ] = None,
        image: Annotated[str, Parameter(help="Image of job pods when a SpurJob names none.")] = "spur:latest",
        pod_namespace: Annotated[
            str, Parameter(help="Namespace of pods of jobs not submitted as SpurJobs (--namespace if given).")
        ] = "default",
        node_selector: Annotated[
            str, Parameter(help="Register only nodes with these labels (key=value,...).")
        ] = "",
        default_uid: Annotated[int, Parameter(help="uid of SpurJob users without a uid annotation.")] = 65534,
        join_token: Annotated[
            str, Parameter(help="Node join token ([admission] mode = token); env SPUR_JOIN_TOKEN.")
        ] = "",
        credential_secret: Annotated[
            str, Parameter(help="namespace/name of the Secret keeping node credentials (token admission).")
        ] = "spur/spur-node-credentials",
        resync: Annotated[float, Parameter(help="Seconds between full passes over SpurJobs.")] = 10.0,
        poll: Annotated[float, Parameter(help="Seconds between job status refreshes.")] = 2.0,
        quota_interval: Annotated[float, Parameter(help="Seconds between quota reconcile passes.")] = 30.0,
        kill_grace: Annotated[
            int, Parameter(help="Grace period (s) of pods deleted with their SpurJob.")
        ] = 30,
        connect_timeout: Annotated[float, Parameter(help="Controller connect timeout (s).")] = 10.0,
        keepalive_interval: Annotated[float, Parameter(help="Seconds between keepalive pings.")] = 10.0,
        keepalive_timeout: Annotated[float, Parameter(help="Seconds a ping may go unanswered.")] = 5.0,
        request_timeout: Annotated[float, Parameter(help="Bound on each controller request (s).")] = 30.0,
        tls_mode: Annotated[
            Literal["off", "optional", "required"],
            Parameter(help="TLS on the virtual agent and to spurctld ([tls] mode of the cluster)."),
        ] = "off",
        tls_cert: Annotated[
            str | None,
            Parameter(help="The operator's certificate (PEM) from the cluster CA (spur cert issue)."),
        ] = None,
        tls_key: Annotated[str | None, Parameter(help="Its private key (PEM, mode 0600).")] = None,
        tls_ca: Annotated[str | None, Parameter(help="The cluster CA certificate (PEM).")] = None,
        verbose: Annotated[bool, Parameter(help="Debug logging.")] = False,
    ) -> int:
        from spur.k8s.operator.nodes import parse_selector

        try:
            selector = parse_selector(node_selector)
        except ValueError as exc:
            print(f"spur-k8s-operator: error: {exc}", file=sys.stderr)
            return 2
        if verbose:
            logging.getLogger().setLevel(logging.DEBUG)
        opts = OperatorOptions(
            controller=controller,
            listen=listen,
            address=address,
            namespace=namespace,
            auth_mode=auth_mode,
            jwt_key=jwt_key or os.environ.get("SPUR_JWT_KEY") or None,
            enable_quota=enable_quota,
            health_addr=health_addr,
            kube_api=kube_api or os.environ.get("SPUR_KUBE_API") or None,
            kube_token_file=kube_token_file,
            kube_ca=kube_ca,
            image=image,
            # With --namespace, pods must be where the operator watches them.
            pod_namespace=namespace if namespace and pod_namespace == "default" else pod_namespace,
            node_selector=selector,
            default_uid=default_uid,
            join_token=join_token or os.environ.get("SPUR_JOIN_TOKEN", ""),
            credential_secret=credential_secret,
            resync_secs=resync,
            poll_secs=poll,
            quota_interval_secs=quota_interval,
            kill_grace_secs=kill_grace,
            connect_timeout=connect_timeout,
            keepalive_interval=keepalive_interval,
            keepalive_timeout=keepalive_timeout,
            request_timeout=request_timeout,
            tls_mode=tls_mode,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
        )
        return _run(opts)

    return app


def _run(opts: OperatorOptions) -> int:
    code = 0
    try:
        trio.run(_serve_until_signalled, opts)
    except* KeyboardInterrupt:
        pass
    except* StartupError as group:
        for exc in _leaves(group):
            print(f"spur-k8s-operator: error: {exc}", file=sys.stderr)
            code = getattr(exc, "code", 1)
    if code == 0:
        log.info("spur-k8s-operator stopped")
    return code


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s spur-k8s-operator[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per API request otherwise
    app = _app()
    try:
        result = app(argv if argv is not None else sys.argv[1:], exit_on_error=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:  # cyclopts' parse errors
        print(f"spur-k8s-operator: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
