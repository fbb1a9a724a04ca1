"""TLS for Spur's ports: SSL contexts built from the ``[tls]`` section, hot reload, and the accept step.

Contracts:

- :func:`load_tls_settings` turns a config ``[tls]`` section into :class:`TlsSettings`; with
  ``mode = "off"`` nothing is read. :class:`TlsContexts` builds a daemon's contexts from them and raises
  :class:`TlsConfigError`, one line naming the key and the file: a file that cannot be read, a key
  file readable or writable by group/other (refused like ``auth.jwt_key_file``), a certificate and key
  that do not match, a CA file that is missing or holds no certificate, a mode that needs a file that
  is not set.
- Server contexts: TLS 1.2 or later, ALPN ``h2``, and they ask every client for a certificate: one that
  is presented must chain to ``ca_file``; a client without one is let through (user clients present
  none) unless the context is built with ``require_client_cert`` (the Raft port in required mode).
- Client contexts verify the server against ``ca_file`` (and its name, unless ``verify_hostname`` is
  false); a daemon's client context presents the node certificate (``cert_file``/``key_file``).
- :meth:`TlsContexts.reload` re-reads the files and swaps every context at once, for new connections
  only (existing ones keep the context they were made with); a broken new file leaves the old contexts
  in use and is returned (and logged) as one line.
- A daemon's client in ``optional`` mode tries TLS and, when the peer does not complete a handshake
  (a peer still at ``off``), reconnects in plaintext; in ``required`` mode it never does.
- :func:`accept` turns an accepted TCP stream into the stream the HTTP/2 layer reads: in ``required``
  mode a TLS stream after a handshake; in ``optional`` mode the first byte tells (0x16 starts a TLS
  handshake; anything else is served in plaintext; the byte is only peeked, so it stays in the socket
  for the next reader). A failed or slow handshake closes the connection and returns None.

Imported only where TLS is configured: the CLI loads ``ssl`` only when its config enables TLS.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import trio

from spur.core.secret_file import UnreadableFile, read_config_file

__all__ = [
    "ClientTLS",
    "ServerTLS",
    "TlsConfigError",
    "TlsContexts",
    "TlsSettings",
    "accept",
    "client_handshake",
    "load_tls_settings",
    "user_client_tls",
]

log = logging.getLogger("spur.rpc.tls")

MODES = ("off", "optional", "required")
ALPN = ["h2"]
_TLS_RECORD_HANDSHAKE = 0x16


class TlsConfigError(ValueError):
    """The ``[tls]`` section cannot be used; the message is one line naming the key, the file and why."""


class TlsSection(Protocol):
    """What :func:`load_tls_settings` reads (spur.config.model.TlsConfig)."""

    @property
    def mode(self) -> object: ...
    @property
    def cert_file(self) -> Path | None: ...
    @property
    def key_file(self) -> Path | None: ...
    @property
    def ca_file(self) -> Path | None: ...
    @property
    def verify_hostname(self) -> bool: ...
    @property
    def handshake_timeout_secs(self) -> float: ...


@dataclass(frozen=True)
class TlsSettings:
    """The ``[tls]`` section resolved: the mode and the three files (paths only: nothing is read here)."""

    mode: str = "off"
    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None
    verify_hostname: bool = True
    handshake_timeout_secs: float = 10.0

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


def load_tls_settings(section: TlsSection | None) -> TlsSettings:
    """Resolve a config ``[tls]`` section (None or absent: TLS off)."""
    if section is None:
        return TlsSettings()
    mode = str(getattr(section.mode, "value", section.mode))
    if mode not in MODES:
        raise TlsConfigError(f"tls.mode {mode!r}: must be one of {', '.join(MODES)}")
    return TlsSettings(
        mode=mode,
        cert_file=section.cert_file,
        key_file=section.key_file,
        ca_file=section.ca_file,
        verify_hostname=bool(section.verify_hostname),
        handshake_timeout_secs=float(section.handshake_timeout_secs),
    )


# ---------------------------------------------------------------------- building contexts


def _need(settings: TlsSettings, key: str) -> Path:
    value = getattr(settings, key)
    if value is None:
        raise TlsConfigError(f'tls.mode = "{settings.mode}" needs tls.{key}, which is not set')
    return Path(value)


def _readable(key: str, path: Path, *, private: bool = False) -> bytes:
    try:
        return read_config_file(f"tls.{key}", path, private=private)
    except UnreadableFile as exc:
        raise TlsConfigError(str(exc)) from None


def _base_context(purpose: ssl.Purpose) -> ssl.SSLContext:
    ctx = ssl.SSLContext(
        ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT
    )
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # RFC 7540 9.2
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.set_alpn_protocols(ALPN)
    return ctx


def _load_ca(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    path = _need(settings, "ca_file")
    data = _readable("ca_file", path)
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise TlsConfigError(f"tls.ca_file {path}: holds no PEM certificate")
    try:
        ctx.load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(
            f"tls.ca_file {path}: not a usable CA certificate: {describe_ssl_error(exc)}"
        ) from None


def _load_cert(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    cert, key = _need(settings, "cert_file"), _need(settings, "key_file")
    if b"-----BEGIN CERTIFICATE-----" not in _readable("cert_file", cert):
        raise TlsConfigError(f"tls.cert_file {cert}: holds no PEM certificate")
    if b"PRIVATE KEY-----" not in _readable("key_file", key, private=True):
        raise TlsConfigError(f"tls.key_file {key}: holds no PEM private key")
    try:
        ctx.load_cert_chain(certfile=str(cert), keyfile=str(key))
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc) or "key values mismatch" in str(exc):
            raise TlsConfigError(
                f"tls.key_file {key} does not match tls.cert_file {cert} (the key is not this certificate's)"
            ) from None
        raise TlsConfigError(
            f"tls.cert_file {cert} / tls.key_file {key}: not a usable certificate and key: {describe_ssl_error(exc)}"
        ) from None
    except OSError as exc:
        raise TlsConfigError(f"tls.cert_file {cert}: cannot read it: {exc.strerror or exc}") from None


def describe_ssl_error(exc: BaseException) -> str:
    """One line for an ssl error: the verification failure when there is one, else OpenSSL's reason."""
    verify = getattr(exc, "verify_message", None)
    if verify:
        return f"certificate verify failed: {verify}"
    reason = getattr(exc, "reason", None)
    text = str(reason or exc or type(exc).__name__)
    return text.splitlines()[0] if text else type(exc).__name__


def server_context(settings: TlsSettings, *, require_client_cert: bool = False) -> ssl.SSLContext:
    """A server context: this host's certificate, client certificates asked for and checked against
    the CA (required with ``require_client_cert``)."""
    ctx = _base_context(ssl.Purpose.CLIENT_AUTH)
    _load_cert(ctx, settings)
    _load_ca(ctx, settings)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(settings: TlsSettings, *, present_cert: bool) -> ssl.SSLContext:
    """A client context verifying servers against the CA; a daemon's presents the node certificate."""
    ctx = _base_context(ssl.Purpose.SERVER_AUTH)
    _load_ca(ctx, settings)
    ctx.check_hostname = settings.verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if present_cert:
        _load_cert(ctx, settings)
    return ctx


def certificate_summary(path: Path | None) -> str:
    """``serial 0x.., expires YYYY-MM-DD`` of a PEM certificate (for log lines), or ``""``."""
    if path is None:
        return ""
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except Exception:  # noqa: BLE001 - a summary for a log line; the context build reported real errors
        return ""
    return f"serial {cert.serial_number:#x}, expires {cert.not_valid_after_utc:%Y-%m-%d}"


# ---------------------------------------------------------------------- what servers and clients hold


@dataclass(frozen=True)
class ServerTLS:
    """What :meth:`spur.rpc.server.Server.serve` needs: the mode and the current context (a getter, so a
    reload reaches new connections)."""

    mode: str
    context: Callable[[], ssl.SSLContext]
    handshake_timeout: float = 10.0


@dataclass(eq=False)
class ClientTLS:
    """What a client channel needs: the current context, and the last TLS stream per target (its
    session is offered again on the next connection, for an abbreviated handshake)."""

    context: Callable[[], ssl.SSLContext]
    server_hostname: str | None = None
    # [tls] mode = "optional" (a daemon during a migration): a peer that does not complete a TLS
    # handshake (still at mode "off") is reached in plaintext instead.
    plaintext_fallback: bool = False
    _last: dict[str, tuple[ssl.SSLContext, TLSStream]] = field(default_factory=dict, repr=False)

    def session_for(self, authority: str, context: ssl.SSLContext) -> ssl.SSLSession | None:
        """The last session with ``authority``, if it was made with ``context`` (a reload starts over)."""
        last = self._last.get(authority)
        if last is None or last[0] is not context:
            return None
        return last[1].session

    def remember(self, authority: str, stream: TLSStream, context: ssl.SSLContext) -> None:
        self._last[authority] = (context, stream)


class TlsContexts:
    """A daemon's TLS contexts, built from :class:`TlsSettings` and rebuilt by :meth:`reload`.

    Raises :class:`TlsConfigError` when the files cannot be used (only when TLS is enabled)."""

    def __init__(self, settings: TlsSettings, *, name: str = "") -> None:
        self.settings = settings
        self.name = name
        self._contexts: dict[str, ssl.SSLContext] = {}
        if settings.enabled:
            self._contexts = self._build()

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def _who(self) -> str:
        return f"{self.name}: " if self.name else ""

    def _build(self) -> dict[str, ssl.SSLContext]:
        s = self.settings
        rest = server_context(s)
        rest.set_alpn_protocols(["h2", "http/1.1"])
        return {
            "server": server_context(s),
            "peer_server": server_context(s, require_client_cert=s.mode == "required"),
            "client": client_context(s, present_cert=True),
            "rest": rest,
        }

    def reload(self) -> str | None:
        """Re-read the files for new connections. None when done; else the one-line reason, and the
        contexts in use stay as they were."""
        if not self.settings.enabled:
            return None
        try:
            built = self._build()
        except TlsConfigError as exc:
            log.error("%sTLS reload failed, keeping the certificates in use: %s", self._who, exc)
            return str(exc)
        self._contexts = built
        log.info(
            "%sTLS certificates reloaded (%s)", self._who, certificate_summary(self.settings.cert_file) or "?"
        )
        return None

    def _get_server(self) -> ssl.SSLContext:
        return self._contexts["server"]

    def _get_peer_server(self) -> ssl.SSLContext:
        return self._contexts["peer_server"]

    def _get_client(self) -> ssl.SSLContext:
        return self._contexts["client"]

    def rest_context(self) -> ssl.SSLContext:
        """The REST server's current context (ALPN h2 and http/1.1)."""
        return self._contexts["rest"]

    def server(self, *, peers_only: bool = False) -> ServerTLS | None:
        """For ``Server.serve``: None when TLS is off. ``peers_only`` (the Raft port): in required mode a
        client must present a certificate of the cluster CA."""
        if not self.enabled:
            return None
        getter = self._get_peer_server if peers_only else self._get_server
        return ServerTLS(self.settings.mode, getter, self.settings.handshake_timeout_secs)

    def client(self) -> ClientTLS | None:
        """For ``open_channel``: None when TLS is off; presents the node certificate."""
        if not self.enabled:
            return None
        return ClientTLS(self._get_client, plaintext_fallback=self.settings.mode == "optional")


def user_client_tls(settings: TlsSettings) -> ClientTLS | None:
    """A user client's TLS (the CLI, REST helpers): verify the server against ``ca_file``, present no
    certificate. None when TLS is off or (optional mode) no ``ca_file`` is set."""
    if not settings.enabled:
        return None
    if settings.ca_file is None:
        if settings.mode == "optional":
            return None
        raise TlsConfigError(
            'tls.mode = "required" needs tls.ca_file to verify the controller, which is not set'
        )
    ctx = client_context(settings, present_cert=False)
    return ClientTLS(lambda: ctx)


class ReloadingContext:
    """Stands in for an ``ssl.SSLContext`` where a library keeps one context for its listener (Hypercorn
    via ``trio.SSLListener``): every new connection is wrapped with the context ``current()`` returns."""

    def __init__(self, current: Callable[[], ssl.SSLContext]) -> None:
        self._current = current

    def wrap_bio(self, *args: object, **kwargs: object) -> ssl.SSLObject:
        return self._current().wrap_bio(*args, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self._current(), name)


# ---------------------------------------------------------------------- the TLS stream


# Plaintext bytes per SSLObject.read: it allocates the whole size each time, and a buffer above glibc's
# mmap threshold (128 KiB) would cost two system calls per read.
_READ = 64 * 1024


class TLSStream(trio.abc.Stream):
    """TLS over a Trio stream, with ``ssl.SSLObject`` and memory BIOs, for the HTTP/2 transport.

    ``trio.SSLStream`` handles any number of concurrent callers and renegotiation; its per-call Python
    work made a small unary call cost 40% more CPU than plaintext (bench.tls). This stream does only
    what :class:`spur.rpc.transport.H2Transport` needs: one task receiving and one sending at a time
    (either may also write TLS records the other produced: transport writes are serialized, in
    order, by draining the outgoing buffer one task at a time). Renegotiation is refused (TLS 1.3 has
    none). Errors are ``trio.BrokenResourceError`` with the ssl error as ``__cause__``; a peer that
    closes (with or without close_notify) reads as EOF.
    """

    def __init__(
        self,
        transport: trio.abc.Stream,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> None:
        self.transport_stream = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(
            self._incoming, self._outgoing, server_side=server_side, server_hostname=server_hostname,
            session=session,
        )  # fmt: skip
        self._sending = False
        self._send_done = trio.lowlevel.ParkingLot()

    # What callers may ask of the TLS session.
    @property
    def session(self) -> ssl.SSLSession | None:
        return self._ssl.session

    @property
    def session_reused(self) -> bool:
        return self._ssl.session_reused

    def selected_alpn_protocol(self) -> str | None:
        return self._ssl.selected_alpn_protocol()

    def getpeercert(self, binary_form: bool = False) -> object:
        return self._ssl.getpeercert(binary_form)

    async def _flush(self) -> None:
        """Send what the SSLObject has queued, in order: one task drains at a time, the others wait
        for it and then send what is left (a trio.Lock costs two scheduler round trips per call)."""
        while self._sending:
            await self._send_done.park()
        data = self._outgoing.read()
        if not data:
            return
        self._sending = True
        try:
            await self.transport_stream.send_all(data)
        finally:
            self._sending = False
            self._send_done.unpark_all()

    async def _fill(self) -> bool:
        """Read more ciphertext; False at EOF."""
        if self._outgoing.pending:
            await self._flush()
        data = await self.transport_stream.receive_some(_READ)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def do_handshake(self) -> None:
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                if not await self._fill():
                    await self._flush_quietly()
                    raise trio.BrokenResourceError("UNEXPECTED_EOF_WHILE_READING: peer closed") from None
                continue
            except (ssl.SSLError, ssl.CertificateError) as exc:
                await self._flush_quietly()  # the alert tells the peer why
                raise trio.BrokenResourceError(describe_ssl_error(exc)) from exc
            await self._flush()
            return

    async def _flush_quietly(self) -> None:
        try:
            await self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        awaited = False
        if not self._incoming.pending and not self._ssl.pending():
            # Nothing buffered: read from the socket first rather than fail a read (an exception).
            awaited = True
            if not await self._fill():
                return b""
        while True:
            try:
                data = self._ssl.read(min(max_bytes or _READ, _READ))
            except ssl.SSLWantReadError:
                awaited = True
                if not await self._fill():
                    return b""
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(describe_ssl_error(exc)) from exc
            if self._outgoing.pending:  # TLS 1.3 post-handshake messages (tickets, key updates)
                await self._flush()
            elif not awaited:
                await trio.lowlevel.checkpoint()
            return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(describe_ssl_error(exc)) from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        try:
            self._ssl.unwrap()  # queues close_notify
        except (ssl.SSLError, ValueError):
            pass
        with trio.move_on_after(1):
            await self._flush_quietly()
        await self.transport_stream.aclose()


# ---------------------------------------------------------------------- connections


async def accept(stream: trio.SocketStream, tls: ServerTLS, peer: str) -> trio.abc.Stream | None:
    """The stream to serve HTTP/2 on, or None (the connection was closed: a handshake that failed or
    took longer than ``tls.handshake_timeout``, or a plaintext client in required mode)."""
    with trio.move_on_after(tls.handshake_timeout):
        if tls.mode == "optional":
            try:
                first = await stream.socket.recv(1, socket.MSG_PEEK)
            except OSError:
                first = b""
            if not first:
                await stream.aclose()
                return None
            if first[0] != _TLS_RECORD_HANDSHAKE:
                return stream
        ssl_stream = TLSStream(stream, tls.context(), server_side=True)
        try:
            await ssl_stream.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            why = describe_ssl_error(exc.__cause__ or exc)
            # A peer that connects and leaves (a TCP health probe, a port scan) is not worth a log line.
            level = logging.DEBUG if "UNEXPECTED_EOF" in why or "EOF occurred" in why else logging.INFO
            log.log(level, "TLS handshake with %s failed: %s", peer, why)
            await trio.aclose_forcefully(stream)
            return None
        return ssl_stream
    log.info("TLS handshake with %s timed out after %gs", peer, tls.handshake_timeout)
    await trio.aclose_forcefully(stream)
    return None


async def client_handshake(stream: trio.SocketStream, tls: ClientTLS, host: str, authority: str) -> TLSStream:
    """Wrap a connected stream in TLS and handshake (offering the last session to this target).
    Raises OSError naming the reason when the handshake fails (the stream is closed)."""
    context = tls.context()
    session = tls.session_for(authority, context)
    ssl_stream = TLSStream(
        stream, context, server_side=False, server_hostname=tls.server_hostname or host, session=session
    )
    try:
        await ssl_stream.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        await trio.aclose_forcefully(stream)
        raise OSError(f"TLS handshake failed: {describe_ssl_error(exc.__cause__ or exc)}") from None
    tls.remember(authority, ssl_stream, context)
    return ssl_stream
