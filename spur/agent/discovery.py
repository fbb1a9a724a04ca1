"""What hardware this compute node has: CPU topology, memory, GPUs, arch, OS, boot time.

Everything is read from procfs/sysfs files under an injectable ``root`` (default ``/``) so the same code runs
on fixture trees in tests. Nothing here talks to a driver library (no NVML, no ROCm SMI) or the network.

Contracts:

- CPU discovery never fails: missing or garbled files degrade to 1 socket x N cores x 1 thread, N >= 1.
- Memory discovery raises :class:`DiscoveryError` when ``MemTotal`` cannot be read (a node that registers
  with 0 MiB would be unschedulable for the wrong reason).
- GPU discovery never fails: an unreadable device is skipped, a missing field leaves the field empty.

GPU ordinals. ``Gpu.vendor_index`` is the ordinal the vendor runtime uses, so a job given GPUs with
``vendor_index`` 1 and 3 gets ``CUDA_VISIBLE_DEVICES=1,3`` (or ``ROCR_VISIBLE_DEVICES=1,3``):

- NVIDIA: PCI bus order. CUDA's default ``CUDA_DEVICE_ORDER=FASTEST_FIRST`` only equals PCI order when
  all GPUs are the same model, and the driver's device minor (``/dev/nvidiaN``) is not guaranteed to
  follow PCI order at all. PCI order is what nvidia-smi and NVML show, so the agent must export
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` into jobs for these ordinals to mean the same GPU to CUDA.
- AMD: the order of KFD topology nodes that are GPUs, by node number, which is how ROCr enumerates agents.

``Gpu.index`` is the node-wide ordinal across vendors, 0..n-1 with NVIDIA first, assigned by
:func:`discover_gpus` (the per-vendor functions return ``index == vendor_index``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CpuTopology",
    "DiscoveryError",
    "Gpu",
    "NodeHardware",
    "discover",
    "discover_amd_gpus",
    "discover_cpus",
    "discover_gpus",
    "discover_memory_mb",
    "discover_nvidia_gpus",
    "normalize_gpu_model",
    "parse_cpu_list",
]

_ROOT = Path("/")
_AMD_PCI_VENDOR = "0x1002"


class DiscoveryError(Exception):
    """Hardware facts that a node cannot register without are missing or unreadable."""


@dataclass(frozen=True)
class CpuTopology:
    """Usable CPUs and their shape. ``sockets * cores_per_socket * threads_per_core >= cpus``; equal
    unless the usable set is a ragged subset of the machine (CPU affinity, offline CPUs)."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int


@dataclass(frozen=True)
class Gpu:
    """One GPU as the node sees it. See the module docstring for ``index`` versus ``vendor_index``."""

    index: int
    vendor: str  # "nvidia" | "amd"
    model: str  # normalize_gpu_model(name), e.g. "a100", "mi250x"; "" when unknown
    pci_bus_id: str  # "0000:07:00.0" (lower-case, sysfs form); "" when unknown
    name: str  # marketing name as reported, e.g. "NVIDIA A100-SXM4-80GB"; "" when unknown
    vendor_index: int  # CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES ordinal
    # Minor of the device node a job needs access to: /dev/nvidia<N> (NVIDIA) or /dev/dri/renderD<N> (AMD);
    # -1 when unknown.
    device_minor: int = -1


@dataclass(frozen=True)
class NodeHardware:
    cpus: CpuTopology
    memory_mb: int
    gpus: tuple[Gpu, ...]
    arch: str  # "x86_64", "aarch64"; "" when unknown
    os: str  # Slurm style "sysname release version", e.g. "Linux 6.8.0-45-generic #45-Ubuntu SMP ..."
    boot_time: float  # seconds since the epoch; 0.0 when unknown


# ---------------------------------------------------------------------------------------------------------
# small file helpers


def _read(path: Path) -> str | None:
    """File contents, or None when it is absent or unreadable (sysfs attributes can fail with EIO)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _read_int(path: Path, base: int = 10) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


def _is_live(root: Path) -> bool:
    return Path(root) == _ROOT


def parse_cpu_list(text: str) -> set[int]:
    """Parse a kernel CPU list such as ``"0-3,8-11"`` or ``"0,4"``. Raises ValueError on malformed text."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        lo = int(first)
        hi = int(last) if sep else lo
        if lo < 0 or hi < lo:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(lo, hi + 1))
    return cpus


# ---------------------------------------------------------------------------------------------------------
# CPUs


def _usable_cpus(root: Path) -> set[int]:
    if _is_live(root):
        try:
            return set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            pass
    text = _read(root / "sys/devices/system/cpu/online")
    if text is not None:
        try:
            cpus = parse_cpu_list(text)
            if cpus:
                return cpus
        except ValueError:
            pass
    processors = {cpu for cpu, _ in _cpuinfo_records(root)}
    if processors:
        return processors
    if _is_live(root):
        return set(range(os.cpu_count() or 1))
    return {0}


def _topology_from_sysfs(root: Path, usable: set[int]) -> CpuTopology | None:
    """Group usable CPUs into cores (by thread siblings) and sockets (by package id)."""
    base = root / "sys/devices/system/cpu"
    sockets: dict[int, dict[object, set[int]]] = {}
    for cpu in sorted(usable):
        topo = base / f"cpu{cpu}/topology"
        package = _read_int(topo / "physical_package_id")
        if package is None:
            return None
        core: object = None
        try:
            core = frozenset(parse_cpu_list(_read(topo / "thread_siblings_list") or ""))
        except ValueError:
            pass
        if not core:
            # core_id is only unique within a package (on some parts only within a die), hence second choice.
            core = _read_int(topo / "core_id")
            if core is None:
                return None
        sockets.setdefault(package, {}).setdefault(core, set()).add(cpu)
    return _shape(len(usable), sockets)


def _cpuinfo_records(root: Path) -> list[tuple[int, dict[str, str]]]:
    """(processor number, fields) per /proc/cpuinfo block; [] when the file is missing."""
    text = _read(root / "proc/cpuinfo")
    if text is None:
        return []
    records: list[tuple[int, dict[str, str]]] = []
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        processor = fields.get("processor")
        if processor is not None and processor.isdigit():
            records.append((int(processor), fields))
    return records


def _topology_from_cpuinfo(root: Path, usable: set[int]) -> CpuTopology | None:
    sockets: dict[int, dict[object, set[int]]] = {}
    for cpu, fields in _cpuinfo_records(root):
        if cpu not in usable:
            continue
        try:
            package = int(fields["physical id"])
            core_id = int(fields["core id"])
        except (KeyError, ValueError):
            return None  # e.g. arm64 cpuinfo has neither field
        sockets.setdefault(package, {}).setdefault(core_id, set()).add(cpu)
    if sum(len(threads) for cores in sockets.values() for threads in cores.values()) != len(usable):
        return None  # cpuinfo does not describe every usable CPU
    return _shape(len(usable), sockets)


def _shape(cpus: int, sockets: dict[int, dict[object, set[int]]]) -> CpuTopology:
    """Shape of the usable CPUs grouped as socket -> core -> threads: the widest socket and core count."""
    return CpuTopology(
        cpus=cpus,
        sockets=max(1, len(sockets)),
        cores_per_socket=max((len(cores) for cores in sockets.values()), default=1),
        threads_per_core=max((len(t) for cores in sockets.values() for t in cores.values()), default=1),
    )


def _flat(cpus: int) -> CpuTopology:
    return CpuTopology(cpus=cpus, sockets=1, cores_per_socket=cpus, threads_per_core=1)


def discover_cpus(root: Path = _ROOT) -> CpuTopology:
    """Usable CPUs and their socket/core/thread shape.

    Usable CPUs are this process's affinity mask when ``root`` is ``/`` (so a containerised or
    cpuset-restricted agent reports what it can actually use), otherwise ``<root>/sys/devices/system/cpu/
    online``. The shape is computed over the usable CPUs only, from sysfs topology files, else from
    /proc/cpuinfo, else 1 socket x cpus cores x 1 thread. Never raises.
    """
    root = Path(root)
    usable = _usable_cpus(root)
    return _topology_from_sysfs(root, usable) or _topology_from_cpuinfo(root, usable) or _flat(len(usable))


# ---------------------------------------------------------------------------------------------------------
# memory, OS, boot time


def discover_memory_mb(root: Path = _ROOT) -> int:
    """``MemTotal`` from ``<root>/proc/meminfo`` in MiB, rounded down. Raises DiscoveryError if unreadable."""
    path = Path(root) / "proc/meminfo"
    text = _read(path)
    if text is None:
        raise DiscoveryError(f"cannot read {path}: needed for the node's memory size")
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB\s*$", text, re.MULTILINE)
    if match is None:
        raise DiscoveryError(f"{path} has no 'MemTotal: <n> kB' line")
    return int(match.group(1)) // 1024


def _discover_arch(root: Path) -> str:
    arch = (_read(root / "proc/sys/kernel/arch") or "").strip()
    if not arch and _is_live(root):
        arch = os.uname().machine
    return arch


def _discover_os(root: Path) -> str:
    parts = [(_read(root / f"proc/sys/kernel/{name}") or "").strip() for name in ("ostype", "osrelease")]
    parts.append((_read(root / "proc/sys/kernel/version") or "").strip())
    if not parts[0] and _is_live(root):
        uname = os.uname()
        parts = [uname.sysname, uname.release, uname.version]
    return " ".join(p for p in parts if p)


def _discover_boot_time(root: Path) -> float:
    match = re.search(r"^btime\s+(\d+)\s*$", _read(root / "proc/stat") or "", re.MULTILINE)
    return float(match.group(1)) if match else 0.0


# ---------------------------------------------------------------------------------------------------------
# GPUs: naming

# Words that say who made or sells the GPU rather than which GPU it is.
_BRAND_WORDS = frozenset({"nvidia", "amd", "ati", "tesla", "geforce", "quadro", "instinct", "radeon", "pro"})
_SERIES_WORDS = frozenset({"rtx", "gtx", "titan"})


def normalize_gpu_model(name: str) -> str:
    """Short lower-case model used as the GRES type: ``"NVIDIA A100-SXM4-80GB"`` -> ``"a100"``.

    Brand words are dropped, then the first word is cut at the first ``-`` (form factor and memory suffixes).
    Series words are joined to a following number (``"GeForce RTX 4090"`` -> ``"rtx4090"``) and dropped
    before a letter-led model (``"RTX A6000"`` -> ``"a6000"``). Unknown or generic names give ``""``.
    """
    words = [w for w in re.split(r"[\s/,()]+", name.lower()) if w]
    words = [w for w in words if w not in _BRAND_WORDS]
    if not words:
        return ""
    first = words[0]
    if first in _SERIES_WORDS and len(words) > 1:
        nxt = words[1]
        first = first + nxt if nxt[:1].isdigit() else nxt
    model = re.sub(r"[^a-z0-9]", "", first.split("-", 1)[0])
    if model in {"graphics", "gpu", "device", "unknown"}:
        return ""  # e.g. "NVIDIA Graphics Device" from a driver that predates the board
    return model


def _parse_pci_bus_id(text: str) -> tuple[int, int, int, int] | None:
    """``"0000:07:00.0"`` or ``"00000000:07:00.0"`` (nvidia-smi) -> (domain, bus, device, function)."""
    match = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", text.strip())
    if match is None:
        return None
    domain = int(match.group(1), 16) if match.group(1) else 0
    return domain, int(match.group(2), 16), int(match.group(3), 16), int(match.group(4))


def _format_pci_bus_id(parts: tuple[int, int, int, int]) -> str:
    domain, bus, device, function = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def _pci_sort_key(bus_id: str) -> tuple[int, tuple[int, int, int, int] | tuple[()], str]:
    parsed = _parse_pci_bus_id(bus_id)
    return (0, parsed, "") if parsed is not None else (1, (), bus_id)


# ---------------------------------------------------------------------------------------------------------
# GPUs: NVIDIA


def _colon_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def discover_nvidia_gpus(root: Path = _ROOT) -> list[Gpu]:
    """GPUs in ``<root>/proc/driver/nvidia/gpus/<bus id>/information``, in PCI bus order.

    GPUs the driver marks ``GPU Excluded: Yes`` are left out (CUDA cannot use them). ``device_minor`` comes
    from ``Device Minor:`` (older docs call it ``Minor Number:``).
    """
    base = Path(root) / "proc/driver/nvidia/gpus"
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    found: list[tuple[str, str, int]] = []  # (bus id, name, minor)
    for entry in entries:
        text = _read(entry / "information")
        if text is None:
            continue
        fields = _colon_fields(text)
        if fields.get("gpu excluded", "no").lower().startswith("y"):
            continue
        parsed = _parse_pci_bus_id(fields.get("bus location", "")) or _parse_pci_bus_id(entry.name)
        bus_id = _format_pci_bus_id(parsed) if parsed else ""
        minor_text = fields.get("device minor", fields.get("minor number", ""))
        minor = int(minor_text) if minor_text.isdigit() else -1
        found.append((bus_id, fields.get("model", ""), minor))
    found.sort(key=lambda f: _pci_sort_key(f[0]))
    return [
        Gpu(
            index=i,
            vendor="nvidia",
            model=normalize_gpu_model(name),
            pci_bus_id=bus_id,
            name=name,
            vendor_index=i,
            device_minor=minor,
        )
        for i, (bus_id, name, minor) in enumerate(found)
    ]


# ---------------------------------------------------------------------------------------------------------
# GPUs: AMD

# PCI device id -> marketing name, for boards whose sysfs has no product_name (it comes from the board's
# FRU EEPROM and is often missing). Names as in libdrm's amdgpu.ids.
_AMD_DEVICE_NAMES: dict[int, str] = {
    0x738C: "AMD Instinct MI100",
    0x738E: "AMD Instinct MI100",
    0x7408: "AMD Instinct MI250X",
    0x740C: "AMD Instinct MI250X / MI250",
    0x740F: "AMD Instinct MI210",
    0x74A0: "AMD Instinct MI300A",
    0x74A1: "AMD Instinct MI300X",
    0x74A2: "AMD Instinct MI308X",
    0x74A5: "AMD Instinct MI325X",
    0x74A9: "AMD Instinct MI300X HF",
    0x74B5: "AMD Instinct MI300X VF",
    0x75A0: "AMD Instinct MI350X",
    0x75A3: "AMD Instinct MI355X",
}


def _space_fields(text: str) -> dict[str, str]:
    """KFD ``properties`` format: one ``key value`` pair per line."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            fields[key] = value.strip()
    return fields


def _int_field(fields: dict[str, str], key: str) -> int | None:
    try:
        return int(fields[key], 0)
    except (KeyError, ValueError):
        return None


def _amd_drm_devices(root: Path) -> dict[str, tuple[str, Path]]:
    """Map PCI bus id and ``renderD<N>``/``card<N>`` names to (bus id, device dir) for AMD DRM devices."""
    base = root / "sys/class/drm"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return {}
    devices: dict[str, tuple[str, Path]] = {}
    for entry in entries:
        if not re.fullmatch(r"card\d+|renderD\d+", entry.name):
            continue  # connectors such as card0-DP-1
        device = entry / "device"
        if (_read(device / "vendor") or "").strip().lower() != _AMD_PCI_VENDOR:
            continue
        slot = ""
        match = re.search(r"^PCI_SLOT_NAME=(\S+)", _read(device / "uevent") or "", re.MULTILINE)
        candidates = [match.group(1)] if match else []
        if device.is_symlink():
            candidates.append(os.path.basename(os.readlink(device)))
        for candidate in candidates:
            parsed = _parse_pci_bus_id(candidate)
            if parsed is not None:
                slot = _format_pci_bus_id(parsed)
                break
        if slot:
            devices.setdefault(slot, (slot, device))
        devices[entry.name] = (slot, device)
    return devices


def _kfd_gpu_nodes(root: Path) -> list[tuple[int, dict[str, str]]]:
    """(node number, properties) of KFD topology nodes that are GPUs (gpu_id != 0), by node number."""
    base = root / "sys/class/kfd/kfd/topology/nodes"
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    nodes: list[tuple[int, dict[str, str]]] = []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        properties = _read(entry / "properties")
        if properties is None:
            continue
        fields = _space_fields(properties)
        gpu_id = _read_int(entry / "gpu_id")
        if gpu_id is None:
            gpu_id = _int_field(fields, "gpu_id")
        if not gpu_id:
            continue  # CPU node (gpu_id 0) or unknown
        nodes.append((int(entry.name), fields))
    nodes.sort(key=lambda n: n[0])
    return nodes


def discover_amd_gpus(root: Path = _ROOT) -> list[Gpu]:
    """GPUs the ROCm runtime sees: KFD topology nodes with a non-zero gpu_id, in node order.

    PCI bus id comes from the node's ``domain``/``location_id`` properties, else from the DRM render node
    named by ``drm_render_minor``. The name is the DRM device's ``product_name`` when present, else looked up
    by PCI device id. Non-AMD display adapters are never looked at (they have no KFD node, and DRM devices
    are filtered by PCI vendor 0x1002). In a compute-partitioned MI300 (CPX) several GPUs share one bus id.
    """
    root = Path(root)
    nodes = _kfd_gpu_nodes(root)
    if not nodes:
        return []
    drm = _amd_drm_devices(root)
    gpus: list[Gpu] = []
    for ordinal, (_node, fields) in enumerate(nodes):
        render_minor = _int_field(fields, "drm_render_minor")
        by_render = drm.get(f"renderD{render_minor}") if render_minor is not None else None
        bus_id = ""
        location = _int_field(fields, "location_id")
        if location:
            domain = _int_field(fields, "domain") or 0
            bus_id = _format_pci_bus_id((domain, location >> 8, (location >> 3) & 0x1F, location & 0x7))
        elif by_render is not None:
            bus_id = by_render[0]
        drm_device = drm.get(bus_id) or by_render
        name = ""
        if drm_device is not None:
            name = (_read(drm_device[1] / "product_name") or "").strip()
        if not name:
            device_id = _int_field(fields, "device_id")
            name = _AMD_DEVICE_NAMES.get(device_id, "") if device_id is not None else ""
        gpus.append(
            Gpu(
                index=ordinal,
                vendor="amd",
                model=normalize_gpu_model(name),
                pci_bus_id=bus_id,
                name=name,
                vendor_index=ordinal,
                device_minor=render_minor if render_minor is not None else -1,
            )
        )
    return gpus


def discover_gpus(root: Path = _ROOT) -> list[Gpu]:
    """NVIDIA then AMD GPUs; ``index`` renumbered 0..n-1 across both, ``vendor_index`` kept per vendor."""
    gpus = discover_nvidia_gpus(root) + discover_amd_gpus(root)
    return [dataclasses.replace(gpu, index=i) for i, gpu in enumerate(gpus)]


# ---------------------------------------------------------------------------------------------------------


def discover(root: Path = _ROOT) -> NodeHardware:
    """Everything the agent registers with. Raises DiscoveryError only when memory size is unreadable."""
    root = Path(root)
    return NodeHardware(
        cpus=discover_cpus(root),
        memory_mb=discover_memory_mb(root),
        gpus=tuple(discover_gpus(root)),
        arch=_discover_arch(root),
        os=_discover_os(root),
        boot_time=_discover_boot_time(root),
    )
