"""Hardware discovery on fixture trees (tests/fixtures/sysfs/<name>) and on the live machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spur.agent.discovery import (
    CpuTopology,
    DiscoveryError,
    Gpu,
    discover,
    discover_amd_gpus,
    discover_cpus,
    discover_gpus,
    discover_memory_mb,
    discover_nvidia_gpus,
    normalize_gpu_model,
    parse_cpu_list,
)

FIXTURES = Path(__file__).parent / "fixtures" / "sysfs"


def tree(name: str) -> Path:
    return FIXTURES / name


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --------------------------------------------------------------------------------------------- cpu-only


def test_cpu_only_topology_from_sysfs_ignores_offline_cpu() -> None:
    assert discover_cpus(tree("cpu-only")) == CpuTopology(
        cpus=8, sockets=2, cores_per_socket=2, threads_per_core=2
    )


def test_cpu_only_full_node_hardware() -> None:
    hw = discover(tree("cpu-only"))
    assert hw.cpus.cpus == 8
    assert hw.memory_mb == 15936  # 16318464 kB / 1024
    assert hw.gpus == ()
    assert hw.arch == "x86_64"
    assert hw.os == "Linux 6.8.0-45-generic #45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024"
    assert hw.boot_time == 1700000000.0


def test_topology_is_computed_over_usable_cpus_only(tmp_path: Path) -> None:
    # Half of each core's threads online (as with SMT turned off): 2 sockets x 2 cores x 1 thread.
    for cpu in range(8):
        core = cpu % 4
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", f"{core // 2}\n")
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/core_id", f"{core % 2}\n")
        write(
            tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list", f"{core},{core + 4}"
        )
    write(tmp_path, "sys/devices/system/cpu/online", "0-3\n")
    assert discover_cpus(tmp_path) == CpuTopology(cpus=4, sockets=2, cores_per_socket=2, threads_per_core=1)


def test_core_id_is_used_when_thread_siblings_are_missing(tmp_path: Path) -> None:
    write(tmp_path, "sys/devices/system/cpu/online", "0-3")
    for cpu in range(4):
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", "0")
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/core_id", f"{cpu // 2}")
    assert discover_cpus(tmp_path) == CpuTopology(cpus=4, sockets=1, cores_per_socket=2, threads_per_core=2)


def test_cpuinfo_fallback_when_sysfs_has_no_topology() -> None:
    # nvidia-4xa100 has no sys/devices/system/cpu at all: CPUs and shape come from /proc/cpuinfo.
    assert discover_cpus(tree("nvidia-4xa100")) == CpuTopology(
        cpus=4, sockets=1, cores_per_socket=2, threads_per_core=2
    )


def test_cpuinfo_without_topology_fields_gives_flat_shape(tmp_path: Path) -> None:
    # arm64 style cpuinfo: processors but no "physical id" / "core id".
    write(tmp_path, "proc/cpuinfo", "".join(f"processor\t: {i}\nBogoMIPS\t: 50.00\n\n" for i in range(3)))
    assert discover_cpus(tmp_path) == CpuTopology(cpus=3, sockets=1, cores_per_socket=3, threads_per_core=1)


def test_cpu_discovery_never_fails_on_an_empty_or_garbled_tree(tmp_path: Path) -> None:
    assert discover_cpus(tmp_path) == CpuTopology(cpus=1, sockets=1, cores_per_socket=1, threads_per_core=1)
    write(tmp_path, "sys/devices/system/cpu/online", "0-1\n")
    write(tmp_path, "sys/devices/system/cpu/cpu0/topology/physical_package_id", "zero\n")
    assert discover_cpus(tmp_path) == CpuTopology(cpus=2, sockets=1, cores_per_socket=2, threads_per_core=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0-3,8-11\n", {0, 1, 2, 3, 8, 9, 10, 11}), ("0", {0}), ("0,4", {0, 4}), ("", set())],
)
def test_parse_cpu_list(text: str, expected: set[int]) -> None:
    assert parse_cpu_list(text) == expected


@pytest.mark.parametrize("text", ["3-1", "a-b", "1-"])
def test_parse_cpu_list_rejects_malformed_ranges(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)


# --------------------------------------------------------------------------------------------- memory


def test_memory_is_memtotal_in_mib_rounded_down(tmp_path: Path) -> None:
    write(tmp_path, "proc/meminfo", "MemFree:  10 kB\nMemTotal:       2047 kB\n")
    assert discover_memory_mb(tmp_path) == 1


def test_missing_meminfo_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="proc/meminfo"):
        discover_memory_mb(tmp_path)
    write(tmp_path, "proc/meminfo", "MemFree: 10 kB\n")
    with pytest.raises(DiscoveryError, match="MemTotal"):
        discover(tmp_path)


# --------------------------------------------------------------------------------------------- nvidia


def test_nvidia_gpus_in_pci_bus_order_not_minor_order() -> None:
    gpus = discover_nvidia_gpus(tree("nvidia-4xa100"))
    assert [g.pci_bus_id for g in gpus] == ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0"]
    assert [g.vendor_index for g in gpus] == [0, 1, 2, 3]
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert [g.device_minor for g in gpus] == [2, 0, 3, 1]
    assert {(g.vendor, g.model, g.name) for g in gpus} == {("nvidia", "a100", "NVIDIA A100-SXM4-80GB")}


def test_nvidia_fixture_has_no_amd_gpus() -> None:
    assert discover_amd_gpus(tree("nvidia-4xa100")) == []
    assert discover_gpus(tree("nvidia-4xa100")) == discover_nvidia_gpus(tree("nvidia-4xa100"))


def test_nvidia_excluded_gpu_and_odd_entries(tmp_path: Path) -> None:
    base = "proc/driver/nvidia/gpus"
    write(tmp_path, f"{base}/0000:1a:00.0/information", "Model: Tesla V100-SXM2-16GB\nMinor Number: 5\n")
    write(tmp_path, f"{base}/0000:0b:00.0/information", "Model: NVIDIA A10\nGPU Excluded: Yes\n")
    # Bus Location in nvidia-smi's 8-digit-domain, upper-case form is normalised.
    write(
        tmp_path,
        f"{base}/0000:B0:00.0/information",
        "Model: NVIDIA Graphics Device\nBus Location: 00000000:B0:00.0\nDevice Minor: 1\n",
    )
    (tmp_path / base / "0000:c0:00.0").mkdir()  # no information file: skipped
    gpus = discover_nvidia_gpus(tmp_path)
    assert [(g.pci_bus_id, g.model, g.name, g.device_minor) for g in gpus] == [
        ("0000:1a:00.0", "v100", "Tesla V100-SXM2-16GB", 5),
        ("0000:b0:00.0", "", "NVIDIA Graphics Device", 1),
    ]


# --------------------------------------------------------------------------------------------- amd


def test_amd_gpus_from_kfd_topology() -> None:
    gpus = discover_amd_gpus(tree("amd-mi250x"))
    assert gpus == [
        Gpu(0, "amd", "mi250x", "0000:c1:00.0", "AMD Instinct MI250X", vendor_index=0, device_minor=128),
        Gpu(1, "amd", "mi250x", "0000:c6:00.0", "AMD Instinct MI250X", vendor_index=1, device_minor=129),
        # Node 3: no location_id (older kernel), bus id via renderD130; no product_name, name by device id.
        Gpu(
            2,
            "amd",
            "mi250x",
            "0000:83:00.0",
            "AMD Instinct MI250X / MI250",
            vendor_index=2,
            device_minor=130,
        ),
    ]


def test_amd_fixture_ignores_display_cards_and_has_no_nvidia() -> None:
    gpus = discover_gpus(tree("amd-mi250x"))
    assert len(gpus) == 3
    assert all(g.vendor == "amd" for g in gpus)
    assert "0000:02:00.0" not in {g.pci_bus_id for g in gpus}  # ASPEED
    assert "0000:00:02.0" not in {g.pci_bus_id for g in gpus}  # Intel


def test_amd_nodes_ordered_numerically_and_cpu_nodes_skipped(tmp_path: Path) -> None:
    nodes = "sys/class/kfd/kfd/topology/nodes"
    for node, gpu_id, location in [(0, 0, 0), (10, 7, 0x0300), (2, 9, 0x0200), (1, 0, 0)]:
        write(tmp_path, f"{nodes}/{node}/gpu_id", f"{gpu_id}\n")
        write(tmp_path, f"{nodes}/{node}/properties", f"device_id 29857\nlocation_id {location}\ndomain 1\n")
    write(
        tmp_path, f"{nodes}/5/properties", "gpu_id 11\ndevice_id 1\nlocation_id 1024\n"
    )  # gpu_id in properties
    gpus = discover_amd_gpus(tmp_path)
    assert [(g.pci_bus_id, g.model, g.device_minor) for g in gpus] == [
        ("0001:02:00.0", "mi300x", -1),
        ("0000:04:00.0", "", -1),
        ("0001:03:00.0", "mi300x", -1),
    ]


def test_drm_device_symlink_gives_the_bus_id(tmp_path: Path) -> None:
    pci = tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:05:00.0"
    write(pci, "vendor", "0x1002\n")
    write(pci, "product_name", "AMD Instinct MI210\n")
    (tmp_path / "sys/class/drm/renderD128").mkdir(parents=True)
    (tmp_path / "sys/class/drm/renderD128/device").symlink_to(pci)
    write(tmp_path, "sys/class/kfd/kfd/topology/nodes/1/gpu_id", "5")
    write(
        tmp_path, "sys/class/kfd/kfd/topology/nodes/1/properties", "device_id 29711\ndrm_render_minor 128\n"
    )
    [gpu] = discover_amd_gpus(tmp_path)
    assert (gpu.pci_bus_id, gpu.model, gpu.name) == ("0000:05:00.0", "mi210", "AMD Instinct MI210")


# --------------------------------------------------------------------------------------------- mixed


def test_mixed_node_numbers_across_vendors_nvidia_first() -> None:
    gpus = discover_gpus(tree("mixed"))
    assert [(g.index, g.vendor, g.vendor_index, g.model, g.pci_bus_id) for g in gpus] == [
        (0, "nvidia", 0, "h100", "0000:3b:00.0"),
        (1, "amd", 0, "mi300x", "0000:1b:00.0"),
    ]
    hw = discover(tree("mixed"))
    assert hw.gpus == tuple(gpus)
    assert hw.memory_mb == 2048
    # Nothing in the tree describes CPUs, arch, OS or boot time: safe defaults, no host values leak in.
    assert hw.cpus == CpuTopology(cpus=1, sockets=1, cores_per_socket=1, threads_per_core=1)
    assert (hw.arch, hw.os, hw.boot_time) == ("", "", 0.0)


# --------------------------------------------------------------------------------------------- live


def test_live_machine() -> None:
    hw = discover()
    assert hw.cpus.cpus == len(os.sched_getaffinity(0))
    assert hw.cpus.sockets * hw.cpus.cores_per_socket * hw.cpus.threads_per_core >= hw.cpus.cpus
    assert hw.memory_mb > 0
    assert hw.arch == os.uname().machine
    assert hw.os.startswith(os.uname().sysname)
    assert hw.boot_time > 0
    if not Path("/proc/driver/nvidia/gpus").exists() and not Path("/sys/class/kfd").exists():
        assert hw.gpus == ()


# --------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-PCIE-40GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10G", "a10g"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla P100-PCIE-16GB", "p100"),
        ("NVIDIA Tesla T4", "t4"),
        ("Tesla K80", "k80"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Quadro RTX 8000", "rtx8000"),
        ("NVIDIA RTX A6000", "a6000"),
        ("NVIDIA Graphics Device", ""),
        ("AMD Instinct MI250X", "mi250x"),
        ("AMD Instinct MI250X / MI250", "mi250x"),
        ("AMD Instinct MI210", "mi210"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Radeon Pro W7900", "w7900"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize_gpu_model(name: str, model: str) -> None:
    assert normalize_gpu_model(name) == model
