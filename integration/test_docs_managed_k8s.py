"""docs/managed-k8s.md, command by command: every shell command of the guide is run here, in the
guide's order, against a real spurctld and four spurd hosts on loopback (the k0s and systemctl
doubles underneath, the Kubernetes API double behind the control plane's kubeconfig, a fake k0s
release server for install-k0s), or skipped with the reason it cannot run here. Where the guide
shows alternatives (several ``up`` variants), the test tears the cluster down in between."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, wait_for
from integration.k0s_harness import K0sHost, cleanup_hosts, fake_release
from integration.kubeapi.kubectl import KUBECTL

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "managed-k8s.md"

RUN = "run"

#: Every command of the guide, in its order, and what this test does with it.
PLAN: list[tuple[str, str]] = [
    ("sudo spur k8s install-k0s", RUN),
    ("sudo spur k8s install-k0s --version latest", RUN),
    ("sudo spur k8s install-k0s --version v1.36.2+k0s.0 --path /opt/bin/k0s --force", RUN),
    ("spur k8s up", RUN),
    ('spur k8s up --nodes "node[1-3]"', RUN),
    ("spur k8s up --partition batch", RUN),
    ("spur k8s up --selector zone=z1 --selector gpu=mi300", RUN),
    ("spur k8s up --replicas 3", RUN),
    ("spur k8s up --control-plane-nodes node1,node2,node3", RUN),
    ("spur k8s status", RUN),
    ("spur k8s add-nodes --nodes node4", RUN),
    ("spur k8s remove-nodes --nodes node4 --drain-timeout 180", RUN),
    ('spur node drain node3 --reason "disk swap"', RUN),
    ("spur node resume node3", RUN),
    ("spur node remove node4", RUN),
    ("spur k8s down", RUN),
    ("spur k8s down --reset", RUN),
    ("spur k8s kubeconfig > mine.conf", RUN),
    ("export KUBECONFIG=$PWD/mine.conf", RUN),
    ("kubectl get nodes", RUN),
    ("spur k8s kubeconfig --user alice", RUN),
    ("spur k8s kubeconfig --admin", RUN),
    ("kubectl get nodes -o wide", RUN),
    ("kubectl create deployment web --image=nginx", RUN),
    ("kubectl run -it --rm probe --image=busybox -- sh", RUN),
]


def guide_commands() -> list[str]:
    """Each line of every ```sh block of the guide (comments and blank lines dropped)."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_plan_is_the_guide() -> None:
    assert guide_commands() == [cmd for cmd, _ in PLAN]


class Walk:
    def __init__(self, tmp: Path, api_url: str, release_url: str) -> None:
        self.tmp = tmp
        (tmp / "ctl").mkdir()
        conf = (
            "[cluster]\nenabled = true\nallow_admin_kubeconfig = true\nk8s_provisioning_timeout_secs = 120\n"
            '[[partitions]]\nname = "batch"\nnodes = "node[1-2]"\n'
        )
        self.cluster = Cluster(tmp / "ctl", conf_extra=conf)
        self.cluster.start_controller()
        # node2 and node3 carry the features the guide's --selector example asks for
        self.hosts = [
            K0sHost(name=f"node{i}", root=tmp / f"node{i}", cluster=self.cluster,
                    extra_env={"FAKE_K0S_API_URL": api_url},
                    spurd_extra=["--features", "zone=z1,gpu=mi300"] if i in (2, 3) else []).start()
            for i in range(1, 5)
        ]
        self.cluster.wait_nodes(*(h.name for h in self.hosts))
        # install-k0s runs "on a node": its own spur.conf points at the fake release server
        self.node_conf = tmp / "node-spur.conf"
        self.node_conf.write_text(
            f'[cluster]\nenabled = true\nk0s_binary = "{tmp / "usr/local/bin/k0s"}"\n'
            f'k0s_release_url = "{release_url}"\n'
        )
        self.work = tmp / "work"
        self.work.mkdir()
        self.env = dict(self.cluster.env)
        self.env["HOME"] = str(tmp / "home")

    def sh(self, command: str, env: dict[str, str] | None = None, input: str | None = None
           ) -> subprocess.CompletedProcess:
        r = subprocess.run(["bash", "-c", f"set -e\n{command}"], cwd=self.work, env=env or self.env,
                           input=input, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{command!r} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def phase(self) -> str:
        return self.sh("spur k8s status").stdout.splitlines()[0].split(": ", 1)[1]

    def torn_down(self) -> None:
        """Between alternatives: down, and wait until every node's k0s has stopped."""
        if self.phase() != "down":
            self.sh("spur k8s down")

        def stopped() -> bool:
            return all("active" not in subprocess.run(
                [str(ROOT / "integration/doubles/bin/systemctl"), "is-active", "spur-k0s"],
                env=h.env(), capture_output=True, text=True).stdout.split() for h in self.hosts)

        wait_for(stopped, timeout=60, what="k0s stopped everywhere")

    def up(self, command: str) -> str:
        def attempt() -> str | None:
            r = subprocess.run(["bash", "-c", command], cwd=self.work, env=self.env, capture_output=True,
                               text=True, timeout=300)
            if "still stopping" in r.stderr:
                return None
            assert r.returncode == 0, f"{command!r} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
            return r.stdout

        out = wait_for(attempt, timeout=60, what=command)
        assert "phase: ready" in out, out
        return out

    def stop(self) -> None:
        cleanup_hosts(self.hosts)
        self.cluster.stop()


def test_guide_walkthrough(tmp_path: Path) -> None:
    from integration.k8s_harness import kubeapi_process

    assert KUBECTL, "kubectl is installed on these machines"
    # --interactive-pods: the double runs `kubectl run -it`'s shell here and serves its attach
    with kubeapi_process(tmp_path, "--interactive-pods") as api_url, fake_release() as release:
        walk = Walk(tmp_path, api_url, release.url)
        try:
            _walk(walk, tmp_path)
        finally:
            walk.stop()


def _walk(walk: Walk, tmp: Path) -> None:
    done = []
    node_env = {**walk.env, "SPUR_CONF": str(walk.node_conf)}
    for command, how in PLAN:
        if how != RUN:
            done.append(command)
            continue
        if command.startswith("sudo spur k8s install-k0s"):
            cmd = command.removeprefix("sudo ").replace("/opt/bin/k0s", str(tmp / "opt/bin/k0s"))
            out = walk.sh(cmd, env=node_env).stdout
            assert "installed k0s" in out or "already installed" in out, out
        elif command.startswith("spur k8s up"):
            walk.torn_down()
            out = walk.up(command)
            if "--replicas 3" in command or "--control-plane-nodes" in command:
                assert "control-plane: node1,node2,node3" in out
            if "batch" in command:
                assert "node3" not in out.split("phase: ready", 1)[1]
            if "--selector" in command:
                ready = out.split("phase: ready", 1)[1]
                assert "node2" in ready and "node3" in ready and "node1" not in ready and "node4" not in ready
        elif command == "spur k8s status":
            out = walk.sh(command).stdout
            assert out.startswith("phase: ready") and "enabled=true" in out
        elif command.startswith("spur k8s add-nodes"):
            walk.torn_down()
            walk.up('spur k8s up --nodes "node[1-3]"')  # add-nodes grows a scoped cluster
            assert "added as worker(s): node4" in walk.sh(command).stdout
            wait_for(lambda: "node4  worker      active" in walk.sh("spur k8s status").stdout, what="node4")
        elif command.startswith("spur k8s remove-nodes"):
            assert "removed node4" in walk.sh(command).stdout
        elif command.startswith("spur node drain"):
            assert "drained node3 (reason: disk swap)" in walk.sh(command).stdout
            assert "disk swap" in walk.sh("sinfo -R -h").stdout
            assert "node3  worker      active" in walk.sh("spur k8s status").stdout  # k0s untouched
        elif command == "spur node resume node3":
            walk.sh(command)
            assert "State=IDLE " in walk.sh("scontrol show node node3").stdout
        elif command == "spur node remove node4":
            walk.hosts[3].proc.kill()  # the guide: stop its spurd first, or it registers again
            assert "removed node4 from the inventory" in walk.sh(command).stdout
            assert "NodeName=node4" not in walk.sh("scontrol show node").stdout
        elif command.startswith("spur k8s down"):
            assert "spur k8s down:" in walk.sh(command).stdout
            assert walk.phase() == "down"
        elif command == "spur k8s kubeconfig > mine.conf":
            walk.torn_down()
            walk.up("spur k8s up")  # the users' part needs a running cluster
            walk.sh(command)
            assert "namespace: root" in (walk.work / "mine.conf").read_text()
        elif command.startswith("export KUBECONFIG"):
            walk.env["KUBECONFIG"] = str(walk.work / "mine.conf")
        elif command == "kubectl create deployment web --image=nginx":
            assert walk.sh(command).stdout == "deployment.apps/web created\n"
            rows = walk.sh("kubectl get deployment web").stdout.splitlines()
            assert rows[0].split()[0] == "NAME" and rows[1].split()[0] == "web", rows
            assert '"image": "nginx"' in walk.sh("kubectl get deployment web -o json").stdout
        elif command.startswith("kubectl run -it --rm probe"):
            out = walk.sh(command, input="echo hello from the probe; exit\n").stdout
            assert out == 'hello from the probe\npod "probe" deleted\n', out
            assert "probe" not in walk.sh("kubectl get pods -o name").stdout
        elif command.startswith("kubectl"):
            out = walk.sh(command).stdout
            assert "NAME" in out or out == "", out
        elif command == "spur k8s kubeconfig --user alice":
            assert "namespace: alice" in walk.sh(command).stdout
        elif command == "spur k8s kubeconfig --admin":
            assert "certificate-authority-data" in walk.sh(command).stdout
        else:
            raise AssertionError(f"no step for {command!r}")
        done.append(command)
    assert done == [cmd for cmd, _ in PLAN]
    assert os.path.exists(tmp / "opt/bin/k0s")
    assert BIN.exists()
