"""How CLI commands reach the controller: address resolution, one Trio run per call, error mapping."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: a query command's start-up is its cost
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any, TypeAlias, TypeVar

    from google.protobuf.descriptor import ServiceDescriptor

    from spur.rpc.blocking import BlockingStub
    from spur.rpc.stub import Stub

    T = TypeVar("T")
    #: What a CLI body is called with: a blocking stub (query commands) or a Trio one.
    ControllerStub: TypeAlias = Stub | BlockingStub

DEFAULT_CONTROLLER = "localhost:6817"


class CliError(Exception):
    """A user-facing failure: ``message`` goes to stderr and the process exits with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


_CONFIG: list[Any] = []


def _config() -> Any:
    """The config file ($SPUR_CONF, else /etc/spur/spur.conf when present), loaded once; None if none."""
    if not _CONFIG:
        conf = os.environ.get("SPUR_CONF") or (
            "/etc/spur/spur.conf" if os.path.exists("/etc/spur/spur.conf") else ""
        )
        cfg = None
        if conf:
            from spur.config import ConfigError, load_config

            try:
                cfg = load_config(conf)
            except ConfigError as exc:
                raise CliError(str(exc)) from None
        _CONFIG.append(cfg)
    return _CONFIG[0]


def controller_targets() -> list[str]:
    """Controller addresses: $SPUR_CONTROLLER (comma list), else the config's, else localhost:6817."""
    env = os.environ.get("SPUR_CONTROLLER")
    if env:
        return [t.strip() for t in env.split(",") if t.strip()]
    cfg = _config()
    if cfg is not None and cfg.agent.controller:
        return list(cfg.agent.controller)
    return [DEFAULT_CONTROLLER]


_METADATA: list[tuple[float, dict[str, str]]] = []
# Broker tokens live minutes: a long-running srun/salloc looks its credential up again after this.
_METADATA_REFRESH_SECS = 60.0


def call_metadata() -> dict[str, str]:
    """What every CLI call carries: the identity headers and, when one is found, the credential
    (spur.auth.credentials: $SLURM_JWT, $SPUR_AUTH_TOKEN, ~/.spur/token, the local broker).
    Cached for a minute, so it can be a channel's ``metadata_provider``."""
    import time

    now = time.monotonic()
    if _METADATA and now - _METADATA[0][0] < _METADATA_REFRESH_SECS:
        return _METADATA[0][1]
    md = _lookup_metadata()
    _METADATA[:] = [(now, md)]
    return md


def _lookup_metadata() -> dict[str, str]:
    from spur.auth.credentials import CredentialError, client_metadata

    try:
        return client_metadata(_configured_broker_socket)
    except CredentialError as exc:
        raise CliError(str(exc)) from None


def _configured_broker_socket() -> str | None:
    """``[auth] broker_socket`` of the config file, read only when the CLI gets that far (no credential
    in the environment or ~/.spur/token). The full config is used when already loaded; otherwise only
    the TOML is parsed (validating the whole file costs a query command ~70 ms)."""
    if _CONFIG:
        cfg = _CONFIG[0]
        return str(cfg.auth.broker_socket) if cfg is not None else None
    section = _toml().get("auth", {})
    value = section.get("broker_socket") if isinstance(section, dict) else None
    return value if isinstance(value, str) and value else None


_TOML: list[dict[str, Any]] = []


def _toml() -> dict[str, Any]:
    """The config file's TOML, parsed once and not validated ({} without a file or when it does not
    parse: a broken file is reported by whatever loads it fully)."""
    if not _TOML:
        conf = os.environ.get("SPUR_CONF") or (
            "/etc/spur/spur.conf" if os.path.exists("/etc/spur/spur.conf") else ""
        )
        data: dict[str, Any] = {}
        if conf:
            import tomllib

            try:
                with open(conf, "rb") as f:
                    data = tomllib.load(f)
            except (OSError, tomllib.TOMLDecodeError):
                data = {}
        _TOML.append(data)
    return _TOML[0]


_TLS: list[Any] = []


def client_tls() -> Any:
    """The CLI's TLS (spur.rpc.tls.ClientTLS: verify the servers against ``[tls] ca_file``, present no
    certificate), or None when ``[tls] mode`` is off (the default) or, in optional mode, no ca_file is
    set. ``ssl`` is imported only when TLS is on. Like the broker socket, the section is read from the
    TOML alone unless the whole config is already loaded. Raises CliError for an unusable CA file."""
    if not _TLS:
        section = _tls_section()
        tls = None
        if section.get("mode", "off") != "off":
            from pathlib import Path

            from spur.rpc.tls import TlsConfigError, TlsSettings, user_client_tls

            ca = section.get("ca_file")
            try:
                tls = user_client_tls(
                    TlsSettings(
                        mode=str(section["mode"]),
                        ca_file=Path(ca) if ca else None,
                        verify_hostname=bool(section.get("verify_hostname", True)),
                    )
                )
            except TlsConfigError as exc:
                raise CliError(str(exc)) from None
        _TLS.append(tls)
    return _TLS[0]


def rest_ssl_context() -> Any:
    """An ``ssl.SSLContext`` for the REST API (https, HTTP/1.1 as WebSocket clients speak it) verifying
    it against ``[tls] ca_file``, or None when the CLI's TLS is off (see :func:`client_tls`)."""
    if client_tls() is None:
        return None
    from pathlib import Path

    from spur.rpc.tls import TlsSettings, client_context

    section = _tls_section()
    ctx = client_context(
        TlsSettings(
            mode=str(section["mode"]),
            ca_file=Path(section["ca_file"]),
            verify_hostname=bool(section.get("verify_hostname", True)),
        ),
        present_cert=False,
    )
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _tls_section() -> dict[str, Any]:
    if _CONFIG:
        cfg = _CONFIG[0]
        if cfg is None:
            return {}
        t = cfg.tls
        return {"mode": str(t.mode), "ca_file": t.ca_file, "verify_hostname": t.verify_hostname}
    section = _toml().get("tls", {})
    return section if isinstance(section, dict) else {}


def service_stub(controller_stub: ControllerStub, service: ServiceDescriptor) -> ControllerStub:
    """A stub for another controller service (``service``: its descriptor) on the same connection as
    ``controller_stub``, of the same kind (blocking or Trio)."""
    from spur.rpc.blocking import BlockingStub

    if isinstance(controller_stub, BlockingStub):
        return BlockingStub(controller_stub.channel, service)
    from spur.rpc.stub import Stub

    return Stub(controller_stub.channel, service)


def with_controller(
    body: Callable[[ControllerStub], Awaitable[T]], *, timeout: float | None = 30.0, lite: bool = False
) -> T:
    """Run ``body(stub)`` against the first reachable controller; RpcError -> CliError.

    Bodies run on a blocking socket client (no Trio import: half the cold start of a query command),
    server streams included; a body that needs a timer or a client stream is run under Trio instead. Bodies must
    not write before they stream, since the Trio run starts them again.

    With ``lite``, the stub takes and returns :mod:`spur.rpc.lite` messages (only the RPCs that
    module covers; protobuf is never loaded) and the body must be unary-only.
    """
    from spur.rpc.status import RpcError, StatusCode

    md = call_metadata()
    targets = controller_targets()
    try:
        try:
            return _run_blocking(body, targets, md, lite)
        except _NeedsTrio:
            if lite:
                raise RuntimeError("a lite controller body must make unary calls only") from None
            return _run_trio(body, targets, md)
    except RpcError as exc:
        if exc.code is StatusCode.UNAVAILABLE:
            raise CliError(f"Unable to contact slurm controller (connect failure): {exc.message}") from None
        raise CliError(exc.message) from None


class _NeedsTrio(Exception):
    pass


def _run_blocking(
    body: Callable[[ControllerStub], Awaitable[T]], targets: list[str], md: dict[str, str], lite: bool = False
) -> T:
    from spur.rpc.blocking import (
        BlockingChannel,
        NeedsEventLoop,
        blocking_controller_stub,
        drive,
        lite_controller_stub,
    )
    from spur.rpc.status import RpcError, StatusCode

    make_stub = lite_controller_stub if lite else blocking_controller_stub
    last: RpcError | None = None
    tls = client_tls()
    for target in targets:
        try:
            with BlockingChannel(target, metadata=md, tls=tls) as ch:
                return drive(_call(body, make_stub(ch)))
        except NeedsEventLoop:
            raise _NeedsTrio() from None
        except RpcError as exc:
            if exc.code is not StatusCode.UNAVAILABLE:
                raise
            last = exc
    assert last is not None
    raise last


async def _call(body: Callable[[ControllerStub], Awaitable[T]], stub: ControllerStub) -> T:
    """A coroutine around ``body``, which may be a lambda returning the stub's awaitable."""
    return await body(stub)


def _run_trio(body: Callable[[ControllerStub], Awaitable[T]], targets: list[str], md: dict[str, str]) -> T:
    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.status import RpcError, StatusCode
    from spur.rpc.stub import controller_stub

    async def run() -> T:
        last: RpcError | None = None
        for target in targets:
            try:
                async with open_channel(
                    target, connect_timeout=5.0, metadata_provider=lambda: md, tls=client_tls()
                ) as ch:
                    return await body(controller_stub(ch))
            except RpcError as exc:
                if exc.code is not StatusCode.UNAVAILABLE:
                    raise
                last = exc
        assert last is not None
        raise last

    return trio.run(run)


# What each command says before the reason a submission was refused.
from spur.core.submit_words import SUBMIT_FAILED  # noqa: E402,F401  (re-exported)


def submit_failure(prog: str, prefix: str, message: str) -> str:
    """Slurm's lines for a refused submission: every line of the controller's ``message`` but the
    last as ``PROG: error: LINE``, the last as ``PROG: error: PREFIX LAST`` (e.g. ``Batch job
    submission failed: Requested node configuration is not available``)."""
    lines = message.split("\n") or [""]
    out = [f"{prog}: error: {line}" for line in lines[:-1]]
    out.append(f"{prog}: error: {prefix}{lines[-1]}")
    return "\n".join(out)


def fail(prog: str, message: str, exit_code: int = 1) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return exit_code
