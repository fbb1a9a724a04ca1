"""Pure parts of the k0s installer: architecture names, checksum lookup, the latest tag."""

from __future__ import annotations

import pytest

from spur.k8s.cluster.install import InstallError, arch_of, binary_name, expected_sha256, tag_from_latest

DIGEST = "ab" * 32


def test_arch_names():
    assert [arch_of(m) for m in ("x86_64", "aarch64", "armv7l")] == ["amd64", "arm64", "arm"]
    with pytest.raises(InstallError, match="no binary for architecture 'mips'"):
        arch_of("mips")


def test_checksum_lookup():
    sums = f"{'cd' * 32}  k0s-v1-arm64\n{DIGEST} *k0s-v1-amd64\n"
    assert expected_sha256(sums, binary_name("v1", "amd64")) == DIGEST
    with pytest.raises(InstallError, match="lists no checksum for k0s-v1-arm"):
        expected_sha256(sums, "k0s-v1-arm")
    with pytest.raises(InstallError, match="malformed checksum"):
        expected_sha256("xyz  k0s-v1-amd64\n", "k0s-v1-amd64")


def test_latest_tag_from_redirect():
    url = "https://github.com/k0sproject/k0s/releases/tag/v1.36.2%2Bk0s.0"
    assert tag_from_latest(url) == "v1.36.2+k0s.0"
    with pytest.raises(InstallError, match="cannot tell the latest"):
        tag_from_latest("https://github.com/k0sproject/k0s/releases")
