"""WireGuard backends: one interface, two implementations, chosen at run time.

- :class:`KernelBackend`: the in-kernel WireGuard (module ``wireguard``), configured through
  pyroute2's generic-netlink WireGuard API in a worker thread.
- :class:`UserspaceBackend`: ``wireguard-go`` (Debian package ``wireguard-go``), started as a daemon
  for the interface and configured over its UAPI control socket
  ``/var/run/wireguard/<ifname>.sock`` from Trio (codec: :mod:`spur.net.uapi`).

Both create the interface with a private key and listen port, report the device's peers
(:class:`spur.net.uapi.DeviceState`), apply a :class:`spur.net.model.PeerDiff` and destroy the
interface. Addresses, routes and the link state are common (:mod:`spur.net.links`).
:func:`select_backend` picks the kernel where the module is loaded (or loadable), else wireguard-go;
``wg-quick`` is never used.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any, Protocol

import trio

from spur.net import links
from spur.net.model import PeerDiff, PeerState
from spur.net.uapi import DeviceState, UapiError, check_set_response, decode_get, encode_get, encode_set
from spur.net.uapi import response_complete as _complete

__all__ = ["BackendError", "KernelBackend", "UserspaceBackend", "WgBackend", "select_backend"]

UAPI_DIR = Path("/var/run/wireguard")
KERNEL_NAME = "kernel"
USERSPACE_NAME = "wireguard-go"


class BackendError(Exception):
    """The WireGuard device cannot be created or configured; the message says why."""


class WgBackend(Protocol):
    name: str
    ifname: str

    async def exists(self) -> bool: ...
    async def create(self, private_key_b64: str, listen_port: int) -> None: ...
    async def device(self) -> DeviceState: ...
    async def apply(self, diff: PeerDiff) -> None: ...
    async def destroy(self) -> None: ...


def kernel_module_available() -> bool:
    """True when this kernel has WireGuard loaded (``/sys/module/wireguard``; ``modprobe wireguard``
    loads it where it is shipped as a module)."""
    return Path("/sys/module/wireguard").exists()


def select_backend(ifname: str, prefer: str = "auto") -> WgBackend:
    """``kernel`` where the module exists, else ``wireguard-go``; ``prefer`` forces one (tests).

    Raises BackendError naming what to install when neither is available.
    """
    if prefer in ("auto", KERNEL_NAME) and kernel_module_available():
        return KernelBackend(ifname)
    if prefer == KERNEL_NAME:
        raise BackendError("the kernel WireGuard module is not available on this host")
    binary = shutil.which("wireguard-go")
    if binary is None:
        raise BackendError(
            "no WireGuard on this host: the kernel has no wireguard module and wireguard-go is not "
            "installed (apt-get install wireguard-go)"
        )
    return UserspaceBackend(ifname, binary)


class UserspaceBackend:
    """wireguard-go driven over its UAPI socket."""

    name = USERSPACE_NAME

    def __init__(self, ifname: str, binary: str = "wireguard-go", uapi_dir: Path = UAPI_DIR) -> None:
        self.ifname = ifname
        self.binary = binary
        self.socket_path = uapi_dir / f"{ifname}.sock"

    async def _request(self, data: bytes) -> bytes:
        try:
            stream = await trio.open_unix_socket(str(self.socket_path))
        except OSError as exc:
            raise BackendError(
                f"wireguard-go for {self.ifname} is not answering ({exc.strerror or exc})"
            ) from None
        async with stream:
            await stream.send_all(data)
            buf = b""
            with trio.move_on_after(10):
                while not _complete(buf):
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
                    buf += chunk
        return buf

    async def exists(self) -> bool:
        if await links.link_index(self.ifname) is None or not self.socket_path.exists():
            return False
        try:
            decode_get(await self._request(encode_get()))
        except (BackendError, UapiError):
            return False
        return True

    async def create(self, private_key_b64: str, listen_port: int) -> None:
        if not await self.exists():
            if await links.link_index(self.ifname) is not None:
                await links.delete_link(self.ifname)  # a tun left without its daemon
            self.socket_path.unlink(missing_ok=True)  # a socket left by a killed daemon
            env = dict(os.environ, WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD="1")
            env.pop("WG_PROCESS_FOREGROUND", None)
            # Without -f it daemonizes: the parent exits once the interface and socket exist.
            result = await trio.run_process(
                [self.binary, self.ifname], env=env, check=False, capture_stdout=True, capture_stderr=True
            )
            if result.returncode != 0:
                why = (result.stderr or result.stdout).decode(errors="replace").strip().splitlines()
                raise BackendError(
                    f"wireguard-go could not create {self.ifname} (exit {result.returncode}): "
                    + (why[-1] if why else "no message")
                )
            with trio.move_on_after(10):
                while not self.socket_path.exists():
                    await trio.sleep(0.02)
        answer = await self._request(encode_set(private_key_b64=private_key_b64, listen_port=listen_port))
        try:
            check_set_response(answer)
        except UapiError as exc:
            raise BackendError(str(exc)) from None

    async def device(self) -> DeviceState:
        try:
            return decode_get(await self._request(encode_get()))
        except UapiError as exc:
            raise BackendError(str(exc)) from None

    async def apply(self, diff: PeerDiff) -> None:
        if not diff:
            return
        try:
            check_set_response(await self._request(encode_set(upsert=diff.upsert, remove=diff.remove)))
        except UapiError as exc:
            raise BackendError(str(exc)) from None

    async def destroy(self) -> None:
        # wireguard-go exits (and removes its socket) when its tun device goes away.
        await links.delete_link(self.ifname)
        with trio.move_on_after(5):
            while self.socket_path.exists():
                await trio.sleep(0.02)


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


class KernelBackend:
    """In-kernel WireGuard through pyroute2's generic-netlink API (worker threads)."""

    name = KERNEL_NAME

    def __init__(self, ifname: str) -> None:
        self.ifname = ifname

    def _wg(self) -> Any:
        from pyroute2 import WireGuard

        return WireGuard()

    async def exists(self) -> bool:
        return await links.link_index(self.ifname) is not None

    async def create(self, private_key_b64: str, listen_port: int) -> None:
        try:
            await links.create_kernel_link(self.ifname)
        except Exception as exc:  # NetlinkError: "Unknown device type" without the module
            raise BackendError(f"cannot create kernel WireGuard interface {self.ifname}: {exc}") from None

        def configure() -> None:
            with self._wg() as wg:
                wg.set(self.ifname, private_key=private_key_b64, listen_port=listen_port)

        await trio.to_thread.run_sync(configure)

    def _info(self) -> DeviceState:
        state = DeviceState()
        with self._wg() as wg:
            for msg in wg.info(self.ifname):
                state.listen_port = msg.get_attr("WGDEVICE_A_LISTEN_PORT") or state.listen_port
                state.has_private_key = (
                    state.has_private_key or msg.get_attr("WGDEVICE_A_PRIVATE_KEY") is not None
                )
                for peer in msg.get_attr("WGDEVICE_A_PEERS") or []:
                    key = peer.get_attr("WGPEER_A_PUBLIC_KEY")["value"]
                    key = key.decode() if isinstance(key, bytes) else str(key)
                    endpoint = peer.get_attr("WGPEER_A_ENDPOINT") or {}
                    ep = ""
                    if endpoint.get("addr"):
                        addr = endpoint["addr"]
                        ep = f"[{addr}]:{endpoint['port']}" if ":" in addr else f"{addr}:{endpoint['port']}"
                    ips = []
                    for a in peer.get_attr("WGPEER_A_ALLOWEDIPS") or []:
                        ips.append(
                            a.get_attr("WGALLOWEDIP_A_IPADDR") + f"/{a.get_attr('WGALLOWEDIP_A_CIDR_MASK')}"
                        )
                    hs = peer.get_attr("WGPEER_A_LAST_HANDSHAKE_TIME") or {}
                    state.peers[key] = PeerState(
                        public_key=key,
                        endpoint=ep,
                        allowed_ips=tuple(ips),
                        keepalive=peer.get_attr("WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL") or 0,
                        last_handshake=float(hs.get("tv_sec", 0)) + hs.get("tv_nsec", 0) / 1e9,
                        rx_bytes=peer.get_attr("WGPEER_A_RX_BYTES") or 0,
                        tx_bytes=peer.get_attr("WGPEER_A_TX_BYTES") or 0,
                    )
        return state

    async def device(self) -> DeviceState:
        try:
            return await trio.to_thread.run_sync(self._info)
        except Exception as exc:
            raise BackendError(f"cannot read WireGuard interface {self.ifname}: {exc}") from None

    async def apply(self, diff: PeerDiff) -> None:
        def run() -> None:
            with self._wg() as wg:
                for key in diff.remove:
                    wg.set(self.ifname, peer={"public_key": key, "remove": True})
                for p in diff.upsert:
                    peer: dict[str, Any] = {
                        "public_key": p.public_key,
                        "persistent_keepalive": p.keepalive,
                        "allowed_ips": list(p.allowed_ips),
                        "replace_allowed_ips": True,
                    }
                    if p.endpoint:
                        peer["endpoint_addr"], peer["endpoint_port"] = _split_endpoint(p.endpoint)
                    wg.set(self.ifname, peer=peer)

        if diff:
            try:
                await trio.to_thread.run_sync(run)
            except Exception as exc:
                raise BackendError(f"cannot configure WireGuard interface {self.ifname}: {exc}") from None

    async def destroy(self) -> None:
        await links.delete_link(self.ifname)


def public_key_of(private_key_b64: str) -> str:
    """The X25519 public key (base64) of a base64 private key."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = X25519PrivateKey.from_private_bytes(base64.b64decode(private_key_b64))
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def new_private_key() -> str:
    """A fresh X25519 private key, base64 (WireGuard's format)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    raw = X25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return base64.b64encode(raw).decode()
