"""spurd's k0s: the node's k0s systemd unit, written, marked and reconciled by spurd.

Only used when ``[cluster] enabled = true``; spurd must then run as root (:func:`require_root`).

- The unit is ``spur-k0s.service`` in ``[cluster] systemd_unit_dir``; it carries the marker line
  ``X-Spur-Owner=spurd`` so spurd can tell its unit from one ``k0s install`` wrote. k0s is never a
  Spur job: systemd keeps it running across spurd restarts, and a restarted spurd re-adopts the unit
  it finds (:meth:`K0sManager.readopt`).
- ``apply`` installs k0s if missing (SHA-256-verified, :mod:`spur.k8s.cluster.install`), writes the
  control plane's ``k0s.yaml`` (mode 0600 in ``k0s_config_dir``, mode 0700) the first time only --
  an existing config is never rewritten in place -- plus the storage manifests into k0s's
  manifest-deployer directory, caches the join token (mode 0600), writes the unit, and enables and
  starts it. GPU nodes that run workloads get a CDI spec for their GPUs in ``cdi_dir``.
- ``reset`` stops and disables the unit, runs ``k0s reset``, and removes the unit, the cached join token,
  the config and the CDI spec (a token minted against the old cluster CA would fail the next join).

Join tokens and kubeconfigs are secrets: they are never logged or put in error messages.
The pure helpers (:func:`render_unit`, :func:`unit_owned`, :func:`unit_role`, :func:`parse_show`,
:func:`unit_detail`, :func:`component_state`, :func:`cdi_specs`) do no I/O.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import trio

from spur.agent.discovery import Gpu
from spur.agent.private_files import write_private
from spur.config.model import ClusterConfig, NetworkConfig

log = logging.getLogger("spur.agent.k0s")

UNIT_NAME = "spur-k0s.service"
OWNER_MARK = "X-Spur-Owner=spurd"
ROLE_KEY = "X-Spur-K0s-Role="
CDI_FILES = {"amd": "spur-amd-gpu.json", "nvidia": "spur-nvidia-gpu.json"}
#: Units ``k0s install`` writes (never spurd's): looked at when spurd's own unit is not running.
FOREIGN_UNITS = ("k0scontroller.service", "k0sworker.service")
RUNNING_STATES = ("active", "activating", "reloading")


class K0sError(Exception):
    """A user-facing failure of a k0s unit operation (one line, no secrets)."""


def require_root(euid: int | None = None) -> None:
    """Raise K0sError unless running as root (spurd writes systemd units and runs k0s)."""
    if (os.geteuid() if euid is None else euid) != 0:
        raise K0sError(
            "spurd must run as root to manage k0s ([cluster] enabled = true): it writes a systemd unit "
            "and runs k0s. Start spurd as root, or set enabled = false in [cluster]."
        )


# ---------------------------------------------------------------------------------------------------
# pure helpers


def render_unit(argv: Sequence[str], role: str) -> str:
    """The text of spurd's k0s unit running ``argv`` for ``role``."""
    return (
        "# Written and managed by spurd (Spur-managed Kubernetes); spurd rewrites or removes it.\n"
        "[Unit]\n"
        f"Description=k0s {role} (managed by spurd)\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        f"{OWNER_MARK}\n"
        f"{ROLE_KEY}{role}\n"
        "\n"
        "[Service]\n"
        f"ExecStart={shlex.join(argv)}\n"
        "Restart=always\n"
        "RestartSec=10\n"
        "Delegate=yes\n"
        "KillMode=process\n"
        "LimitNOFILE=999999\n"
        "TimeoutStartSec=0\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def unit_owned(text: str) -> bool:
    """True when the unit text carries spurd's marker."""
    return any(line.strip() == OWNER_MARK for line in text.splitlines())


def unit_role(text: str) -> str:
    """The role recorded in spurd's unit ("" when none)."""
    for line in text.splitlines():
        if line.strip().startswith(ROLE_KEY):
            return line.strip()[len(ROLE_KEY):]
    return ""


def exec_role(text: str) -> str:
    """The k0s role a unit's ``ExecStart=`` runs (``single`` for ``controller --single``; "" when
    the unit does not run k0s controller/worker)."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or key != "ExecStart":
            continue
        try:
            argv = shlex.split(value.lstrip("-@+!:"))
        except ValueError:
            return ""
        for word in argv[1:]:
            if word == "worker":
                return "worker"
            if word == "controller":
                single = any(a == "--single" or a == "--single=true" for a in argv)
                return "single" if single else "controller"
    return ""


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show`` output (``Key=Value`` lines) as a dict."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    return props


def unit_detail(props: dict[str, str]) -> str:
    """Why the unit is not running, from its ``systemctl show`` properties ("" when nothing to say).

    Under ``Restart=always`` a k0s that exits is not ``failed`` on a real systemd: ``systemctl start``
    returned 0 after the fork, and the unit waits out ``RestartSec=`` as ``activating`` /
    ``auto-restart``, so the exit is only visible in ``Result=`` and ``ExecMainStatus=``."""
    active, sub = props.get("ActiveState", ""), props.get("SubState", "")
    result, status = props.get("Result", "") or "unknown", props.get("ExecMainStatus", "")
    how = f"{result}, exit status {status}" if result == "exit-code" and status else result
    if active == "failed":
        return f"k0s unit failed ({how})"
    if active == "activating" and sub == "auto-restart":
        return f"k0s exited ({how}); systemd restarts it (restart {props.get('NRestarts', '?')})"
    return ""


def component_state(unit_present: bool, active_state: str, k0s_answers: bool) -> str:
    """What ``spur k8s status`` shows for the node's k0s: ``absent`` (no unit), systemd's state, or
    ``starting`` for a unit systemd runs whose k0s does not answer ``k0s status`` yet."""
    if not unit_present:
        return "absent"
    if active_state == "active" and not k0s_answers:
        return "starting"
    return active_state or "inactive"


def cdi_specs(gpus: Sequence[Gpu]) -> dict[str, dict[str, Any]]:
    """CDI spec per vendor (file name -> spec) so containerd can inject the node's GPUs:
    ``amd.com/gpu`` (``/dev/dri/renderD<N>`` + ``/dev/kfd``) and ``nvidia.com/gpu``
    (``/dev/nvidia<N>`` + the control devices). Devices are named by their index on the node."""
    specs: dict[str, dict[str, Any]] = {}
    for vendor, kind, shared in (
        ("amd", "amd.com/gpu", ["/dev/kfd"]),
        ("nvidia", "nvidia.com/gpu", ["/dev/nvidiactl", "/dev/nvidia-uvm"]),
    ):
        devices = []
        for gpu in gpus:
            if gpu.vendor != vendor or gpu.device_minor < 0:
                continue
            node = f"/dev/dri/renderD{gpu.device_minor}" if vendor == "amd" else f"/dev/nvidia{gpu.device_minor}"
            devices.append({"name": str(gpu.vendor_index), "containerEdits": {"deviceNodes": [{"path": node}]}})
        if devices:
            specs[CDI_FILES[vendor]] = {
                "cdiVersion": "0.6.0",
                "kind": kind,
                "devices": devices,
                "containerEdits": {"deviceNodes": [{"path": p} for p in shared]},
            }
    return specs


# ---------------------------------------------------------------------------------------------------
# the manager


@dataclass(frozen=True)
class Status:
    installed: bool
    unit_present: bool
    spur_owned: bool
    active_state: str
    enabled: bool
    role: str
    component_state: str
    main_pid: int
    detail: str = ""
    running: bool = False  # a k0s unit (spurd's or another) is active/activating
    running_role: str = ""  # the role it runs
    claimed: bool = False  # the running unit is spurd's own (its marker)
    running_unit: str = ""




class K0sManager:
    """The node's k0s unit. ``cluster``/``network`` are spurd's config sections; ``gpus`` the
    discovered GPUs. Methods raise K0sError for failures a caller should see."""

    def __init__(self, cluster: ClusterConfig, network: NetworkConfig, gpus: Sequence[Gpu] = ()) -> None:
        self.cluster = cluster
        self.network = network
        self.gpus = tuple(gpus)
        self.unit_path = cluster.systemd_unit_dir / UNIT_NAME
        self.config_path = cluster.k0s_config_dir / "k0s.yaml"
        self.token_path = cluster.k0s_config_dir / "join-token"
        self.manifest_dir = cluster.k0s_data_dir / "manifests"
        self._lock = trio.Lock()

    async def _run(self, argv: Sequence[str], what: str, check: bool = True) -> str:
        try:
            proc = await trio.run_process(list(argv), capture_stdout=True, capture_stderr=True, check=False)
        except OSError as exc:
            raise K0sError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise K0sError(f"{what} failed (exit {proc.returncode}): {err[-1] if err else 'no output'}")
        return proc.stdout.decode(errors="replace")

    async def _systemctl(self, *args: str, check: bool = True) -> str:
        return await self._run([self.cluster.systemctl, *args], f"systemctl {' '.join(args)}", check)

    def _k0s(self) -> str:
        return str(self.cluster.k0s_binary)

    def _unit_text(self) -> str | None:
        try:
            return self.unit_path.read_text()
        except FileNotFoundError:
            return None

    async def ensure_installed(self) -> None:
        if self.cluster.k0s_binary.exists():
            return
        from spur.k8s.cluster.install import InstallError, install_k0s

        log.info("k0s is not installed at %s: installing %s", self.cluster.k0s_binary, self.cluster.k0s_version)
        try:
            await trio.to_thread.run_sync(
                lambda: install_k0s(
                    version=self.cluster.k0s_version,
                    path=self.cluster.k0s_binary,
                    base_url=self.cluster.k0s_release_url,
                )
            )
        except InstallError as exc:
            raise K0sError(f"installing k0s: {exc}") from None

    async def _foreign_running(self) -> tuple[str, str] | None:
        """(unit, role) of a running k0s unit spurd did not write (``k0s install``'s), if any."""
        for name in FOREIGN_UNITS:
            try:
                text = (self.cluster.systemd_unit_dir / name).read_text()
            except OSError:
                continue
            props = parse_show(await self._systemctl("show", name, "-p", "ActiveState", check=False))
            if props.get("ActiveState") in RUNNING_STATES:
                return name, exec_role(text) or ("worker" if "worker" in name else "controller")
        return None

    async def status(self) -> Status:
        """The unit's state, plus what runs k0s on this node (spurd's unit or a foreign one)."""
        status = await self._own_status()
        if status.active_state in RUNNING_STATES:
            text = self._unit_text() or ""
            owned = status.spur_owned
            role = (status.role if owned else "") or exec_role(text)
            return replace(status, running=True, running_role=role, claimed=owned, running_unit=UNIT_NAME)
        foreign = await self._foreign_running()
        if foreign is not None:
            return replace(status, running=True, running_role=foreign[1], claimed=False, running_unit=foreign[0])
        return status

    async def _own_status(self) -> Status:
        text = self._unit_text()
        installed = self.cluster.k0s_binary.exists()
        if text is None:
            return Status(installed, False, False, "inactive", False, "", "absent", 0)
        props = parse_show(
            await self._systemctl(
                "show", UNIT_NAME, "-p", "ActiveState,SubState,MainPID,UnitFileState,Result,ExecMainStatus,NRestarts"
            )
        )
        active = props.get("ActiveState", "inactive")
        answers = False
        detail = unit_detail(props)
        if active == "active" and installed:
            out = await self._run(
                [self._k0s(), "status", "--data-dir", str(self.cluster.k0s_data_dir)], "k0s status", check=False
            )
            answers = "Role:" in out
        return Status(
            installed=installed,
            unit_present=True,
            spur_owned=unit_owned(text),
            active_state=active,
            enabled=props.get("UnitFileState") == "enabled",
            role=unit_role(text),
            component_state=component_state(True, active, answers),
            main_pid=int(props.get("MainPID", "0") or 0),
            detail=detail,
        )

    async def apply(
        self,
        *,
        role: str,
        control_plane_count: int,
        pod_cidr: str,
        service_cidr: str,
        advertise_address: str | None,
        control_plane_addresses: Sequence[str],
        join_token: str,
    ) -> Status:
        """Bring the node's k0s to ``role``, running. Idempotent."""
        from spur.k8s.cluster.plugins import load_cluster_plugins
        from spur.k8s.cluster.render import CONTROL_PLANE_ROLES, k0s_argv, render_node
        from spur.plugins import PluginNotFound

        async with self._lock:
            existing = self._unit_text()
            if existing is not None and not unit_owned(existing):
                raise K0sError(f"{self.unit_path} exists but was not written by spurd; not touching it")
            if role == "worker" and not join_token and not self.token_path.exists():
                raise K0sError("a k0s worker needs a join token")
            if role == "controller" and existing is None and not join_token and control_plane_count > 1:
                log.info("k0s controller bootstraps the control plane (first control plane)")
            await self.ensure_installed()
            try:
                plugins = load_cluster_plugins(self.cluster)
            except PluginNotFound as exc:
                raise K0sError(str(exc)) from None
            try:
                render = render_node(
                    role=role,
                    control_plane_count=control_plane_count,
                    cni=plugins.cni,
                    storage=plugins.storage,
                    pod_cidr=pod_cidr or self.cluster.pod_cidr,
                    service_cidr=service_cidr or self.cluster.service_cidr,
                    mtu=self.cluster.cni_mtu,
                    wg_enabled=self.network.wg_enabled,
                    local_path_dir=str(self.cluster.local_path_dir),
                    advertise_address=advertise_address or None,
                    control_plane_addresses=control_plane_addresses,
                )
            except ValueError as exc:
                raise K0sError(str(exc)) from None
            self.cluster.k0s_config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.cluster.k0s_config_dir, 0o700)
            if render.config is not None and not self.config_path.exists():
                # rendered once, when this control plane first starts; never rewritten in place
                write_private(self.config_path, json.dumps(render.config, indent=2) + "\n")
                for stack, objects in render.manifests.items():
                    stack_dir = self.manifest_dir / stack
                    stack_dir.mkdir(parents=True, exist_ok=True)
                    for i, obj in enumerate(objects):
                        name = f"{i:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
                        write_private(stack_dir / name, json.dumps(obj, indent=2) + "\n", 0o644)
            needs_token = role == "worker" or (role == "controller" and bool(join_token))
            if join_token:
                write_private(self.token_path, join_token.strip() + "\n")
            argv = k0s_argv(
                binary=self._k0s(),
                role=role,
                data_dir=str(self.cluster.k0s_data_dir),
                config_path=str(self.config_path) if role in CONTROL_PLANE_ROLES else None,
                token_path=str(self.token_path) if needs_token else None,
                kubelet_node_ip=render.kubelet_node_ip,
            )
            if role in ("single", "worker"):
                self._write_cdi()
            text = render_unit(argv, role)
            changed = existing != text
            if changed:
                self.cluster.systemd_unit_dir.mkdir(parents=True, exist_ok=True)
                write_private(self.unit_path, text, 0o644)
                await self._systemctl("daemon-reload")
            await self._systemctl("enable", UNIT_NAME)
            if changed and existing is not None:
                await self._systemctl("restart", UNIT_NAME)
            else:
                await self._systemctl("start", UNIT_NAME)
            log.info("k0s %s unit %s (%s)", role, "written and started" if changed else "running", self.unit_path)
            return await self.status()

    def _write_cdi(self) -> None:
        specs = cdi_specs(self.gpus)
        if not specs:
            return
        self.cluster.cdi_dir.mkdir(parents=True, exist_ok=True)
        for name, spec in specs.items():
            write_private(self.cluster.cdi_dir / name, json.dumps(spec, indent=2) + "\n", 0o644)

    async def _stop_own_unit(self) -> None:
        """Stop and disable spurd's unit, if there is one; a unit spurd did not write is refused."""
        text = self._unit_text()
        if text is None:
            return
        if not unit_owned(text):
            raise K0sError(f"{self.unit_path} was not written by spurd; not touching it")
        await self._systemctl("stop", UNIT_NAME)
        await self._systemctl("disable", UNIT_NAME)
        # a k0s that exited non-zero on SIGTERM leaves the unit "failed", and systemd would hold the
        # next start back (start-limit, restart delay); nothing to reset is not an error
        await self._systemctl("reset-failed", UNIT_NAME, check=False)

    async def stop(self) -> Status:
        """Stop and disable spurd's unit (a no-op without one)."""
        async with self._lock:
            await self._stop_own_unit()
            return await self.status()

    async def reset(self) -> Status:
        """Stop, disable, ``k0s reset``, and remove the unit, the cached token, config and CDI spec."""
        async with self._lock:
            had_unit = self._unit_text() is not None
            await self._stop_own_unit()
            if self.cluster.k0s_binary.exists():
                await self._run(
                    [self._k0s(), "reset", "--data-dir", str(self.cluster.k0s_data_dir)], "k0s reset"
                )
            for path in (self.token_path, self.config_path, *(self.cluster.cdi_dir / n for n in CDI_FILES.values())):
                path.unlink(missing_ok=True)
            if had_unit:
                self.unit_path.unlink(missing_ok=True)
                await self._systemctl("daemon-reload")
            log.info("k0s reset: unit, join token and k0s state removed")
            return await self.status()

    async def create_token(self, role: str) -> str:
        if role not in ("worker", "controller"):
            raise K0sError(f"invalid token role {role!r} (worker or controller)")
        out = await self._run(
            [self._k0s(), "token", "create", f"--role={role}", "--data-dir", str(self.cluster.k0s_data_dir)],
            "k0s token create",
        )
        return out.strip()

    async def admin_kubeconfig(self) -> str:
        return await self._run(
            [self._k0s(), "kubeconfig", "admin", "--data-dir", str(self.cluster.k0s_data_dir)],
            "k0s kubeconfig admin",
        )

    async def readopt(self) -> Status | None:
        """At spurd start: report the unit a previous spurd left running (k0s kept running)."""
        text = self._unit_text()
        if text is None or not unit_owned(text):
            return None
        status = await self.status()
        log.info(
            "re-adopted k0s %s unit %s: %s (pid %d)",
            status.role, self.unit_path, status.component_state, status.main_pid,
        )
        return status
