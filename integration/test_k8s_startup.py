"""spurctld refuses to start when a configured cluster plugin is not installed (and says which
pip package to install); with [cluster] disabled the cluster plugins are not even looked up."""

from __future__ import annotations

import os
import subprocess

import pytest

from integration.harness import BIN, free_port

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("setting", "package"),
    [('cni = "cilium"', "spur-cni-cilium"), ('storage_provisioner = "ceph"', "spur-storage-ceph")],
)
def test_missing_cluster_plugin_is_a_startup_error(tmp_path, setting, package):
    conf = tmp_path / "spur.conf"
    conf.write_text(f"[cluster]\nenabled = true\n{setting}\n")
    proc = subprocess.run(
        [str(BIN / "spurctld"), "-D", "-f", str(conf), "--state-dir", str(tmp_path / "s"),
         "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=30, env=dict(os.environ),
    )
    assert proc.returncode == 78, proc.stderr
    assert f"pip install {package}" in proc.stderr.strip().splitlines()[-1]
