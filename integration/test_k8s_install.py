"""``spur k8s install-k0s`` against a fake k0s release served from loopback (never the internet)."""

from __future__ import annotations

import os
import platform
import stat
import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN
from integration.k0s_harness import NEWEST, TAG, Release, fake_release
from spur.k8s.cluster.install import arch_of

pytestmark = pytest.mark.integration

@pytest.fixture
def release():
    with fake_release() as rel:
        yield rel


def spur_k8s(tmp_path: Path, release: Release, *args: str, enabled: bool = True) -> subprocess.CompletedProcess:
    conf = tmp_path / "spur.conf"
    conf.write_text(
        f'[cluster]\nenabled = {"true" if enabled else "false"}\nk0s_release_url = "{release.url}"\n'
        f'k0s_binary = "{tmp_path / "bin/k0s"}"\n'
    )
    env = {**os.environ, "SPUR_CONF": str(conf)}
    return subprocess.run([str(BIN / "spur"), "k8s", *args], env=env, capture_output=True, text=True, timeout=60)


def test_install_pinned_version_verified_and_executable(tmp_path, release):
    r = spur_k8s(tmp_path, release, "install-k0s")
    assert r.returncode == 0, r.stderr
    target = tmp_path / "bin/k0s"
    assert f"installed k0s {TAG} at {target}" in r.stdout and "verified" in r.stdout
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert subprocess.run([str(target)], capture_output=True, text=True, timeout=30).stdout.strip() == TAG
    # the checksums are fetched before the binary
    downloads = [p for p in release.requests if "/download/" in p]
    assert downloads[0].endswith("/sha256sums.txt") and downloads[1].endswith(f"k0s-{TAG}-{arch_of(platform.machine())}")
    assert sorted(p.name for p in target.parent.iterdir()) == ["k0s"]


def test_latest_and_explicit_path_and_force(tmp_path, release):
    other = tmp_path / "opt/bin/k0s"
    r = spur_k8s(tmp_path, release, "install-k0s", "--version", "latest", "--path", str(other))
    assert r.returncode == 0, r.stderr
    assert f"installed k0s {NEWEST} at {other}" in r.stdout
    r = spur_k8s(tmp_path, release, "install-k0s", "--version", TAG, "--path", str(other))
    assert r.returncode == 0 and "already installed" in r.stdout and "--force" in r.stdout
    assert subprocess.run([str(other)], capture_output=True, text=True, timeout=30).stdout.strip() == NEWEST
    r = spur_k8s(tmp_path, release, "install-k0s", "--version", TAG, "--path", str(other), "--force")
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(other)], capture_output=True, text=True, timeout=30).stdout.strip() == TAG


def test_checksum_mismatch_installs_nothing(tmp_path, release):
    arch = arch_of(platform.machine())
    release.files[TAG][f"k0s-{TAG}-{arch}"] = b"#!/bin/sh\necho tampered\n"
    target = tmp_path / "bin/k0s"
    target.parent.mkdir()
    target.write_text("previous")
    r = spur_k8s(tmp_path, release, "install-k0s", "--force")
    assert r.returncode == 1
    assert "SHA-256 mismatch" in r.stderr and f"nothing was installed at {target}" in r.stderr
    assert target.read_text() == "previous"
    assert sorted(p.name for p in target.parent.iterdir()) == ["k0s"], "no temporary file left behind"


def test_unknown_release_and_missing_checksum(tmp_path, release):
    r = spur_k8s(tmp_path, release, "install-k0s", "--version", "v0.0.1+k0s.0")
    assert r.returncode == 1 and "HTTP 404" in r.stderr and "sha256sums.txt" in r.stderr
    del release.files[TAG]["sha256sums.txt"]
    release.files[TAG]["sha256sums.txt"] = b"0000  some-other-file\n"
    r = spur_k8s(tmp_path, release, "install-k0s")
    assert r.returncode == 1 and "lists no checksum for k0s-" in r.stderr
    assert not (tmp_path / "bin/k0s").exists()


def test_feature_off_says_how_to_turn_it_on(tmp_path, release):
    r = spur_k8s(tmp_path, release, "install-k0s", enabled=False)
    assert r.returncode == 1
    assert "Spur-managed Kubernetes is off" in r.stderr and "enabled = true" in r.stderr
    assert release.requests == []
