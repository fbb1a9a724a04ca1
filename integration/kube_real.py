"""A real kube-apiserver (v1.20.2) with etcd for the Kubernetes integration tests.

``scripts/kube/build-apiserver.sh`` builds the binaries once per machine into :func:`kube_dir`
(``SPUR_KUBE_DIR``, default ``/var/cache/spur-test/kube``; ``scripts/setup.sh`` runs it).
``scripts/kube/run-apiserver.sh`` starts etcd and the API server on free loopback ports, as envtest
does: no kubelet, scheduler or controller-manager. So the harness plays the kubelet (pod and node
status through the API), namespaces never finish terminating (each test gets its own), and pods are
deleted with grace period 0.

Credentials: the admin token (group ``system:masters``) is read from the server's work directory and
never printed; :meth:`RealKube.add_token` adds static-token users (how a test runs the operator as
``system:serviceaccount:spur:spur-operator``). The token file is read by the server at start, so
users are added before :func:`start_real_kube` returns (``extra_users``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / "scripts" / "kube" / "build-apiserver.sh"
RUN_SCRIPT = ROOT / "scripts" / "kube" / "run-apiserver.sh"
VERSION = "v1.20.2"


def kube_dir() -> Path:
    """Where the built binaries are cached (outside the clone: one build per machine)."""
    return Path(os.environ.get("SPUR_KUBE_DIR", "/var/cache/spur-test/kube"))


def built(directory: Path | None = None) -> bool:
    d = directory or kube_dir()
    binaries = (d / "bin" / "kube-apiserver").is_file() and (d / "bin" / "etcd").is_file()
    # a build without the zero-value fix (scripts/kube/build-apiserver.sh, fix 3) is not faithful
    return binaries and "kube-openapi-230" in _read(d / "VERSIONS")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def why_unbuildable() -> str | None:
    """Why this machine cannot build the API server (None when it can): the build installs Go
    and fetches Debian's kubernetes source package with apt, so it needs root and apt-get."""
    if os.geteuid() != 0:
        return "building kube-apiserver needs root (apt-get); run scripts/setup.sh as root"
    if shutil.which("apt-get") is None:
        return "building kube-apiserver needs apt-get (a Debian machine)"
    return None


def ensure_built() -> Path:
    """The binaries' directory, building them first when absent (about 7 minutes on 2 cores).
    Raises RuntimeError with the reason when the machine cannot build them or the build fails."""
    d = kube_dir()
    if built(d):
        return d
    reason = why_unbuildable()
    if reason is not None:
        raise RuntimeError(f"no kube-apiserver in {d} and {reason}")
    d.mkdir(parents=True, exist_ok=True)
    lock = d / ".build.lock"  # shared with scripts/setup.sh: one build per machine at a time
    proc = subprocess.run(
        ["flock", str(lock), "bash", str(BUILD_SCRIPT), str(d)], capture_output=True, text=True
    )
    if proc.returncode != 0 or not built(d):
        raise RuntimeError(f"building kube-apiserver into {d} failed:\n{proc.stderr[-3000:]}")
    return d


@dataclass
class KubeUser:
    """A static-token user of the real server (``--token-auth-file``)."""

    name: str
    groups: tuple[str, ...] = ()
    token: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)

    def csv_line(self) -> str:
        groups = ",".join(self.groups)
        line = f"{self.token},{self.name},{uuid.uuid5(uuid.NAMESPACE_URL, self.name)}"
        return f'{line},"{groups}"' if groups else line


#: The operator's ServiceAccount of examples/k8s/rbac.yaml, as a static-token user with the groups
#: a ServiceAccount token carries.
OPERATOR_SA = KubeUser(
    "system:serviceaccount:spur:spur-operator",
    ("system:serviceaccounts", "system:serviceaccounts:spur", "system:authenticated"),
)


@dataclass
class RealKube:
    """A running etcd + kube-apiserver. ``server`` is its https URL; ``ca_file`` verifies it."""

    workdir: Path
    kubeconfig: Path
    server: str
    ca_file: Path
    users: dict[str, KubeUser] = field(default_factory=dict)

    @property
    def token(self) -> str:
        """The admin token (``system:masters``)."""
        return (self.workdir / "token").read_text().strip()

    def token_file(self, user: str) -> Path:
        """A file holding ``user``'s token (mode 0600), for ``--kube-token-file``."""
        path = self.workdir / f"token-{re.sub(r'[^a-zA-Z0-9]+', '-', user)}"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(self.users[user].token + "\n")
        return path

    def kubeconfig_text(self, namespace: str = "default", user: str | None = None) -> str:
        token = self.users[user].token if user else self.token
        return (
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: real\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.ca_file}\n"
            f"contexts:\n- name: real\n  context:\n    cluster: real\n    user: tester\n"
            f"    namespace: {namespace}\n"
            "current-context: real\n"
            f"users:\n- name: tester\n  user:\n    token: {token}\n"
        )

    def http(self, user: str | None = None) -> Any:
        """An httpx client for the API as the admin (or ``user``), verifying the server's certificate."""
        import httpx

        token = self.users[user].token if user else self.token
        return httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {token}"},
            verify=self.ssl_context(),
            trust_env=False,
            timeout=10,
        )

    def ssl_context(self) -> Any:
        """A client TLS context trusting this server's certificate only."""
        import ssl

        return ssl.create_default_context(cafile=str(self.ca_file))

    def compact(self) -> int:
        """Compact etcd at its current revision, as the API server's periodic compaction does (every
        5 minutes by default): a watch asking for any older resourceVersion then gets 410 Gone (at once
        when the server runs with ``--watch-cache=false``; through the watch cache only once the cache
        has moved past it). Returns the revision compacted at."""
        import base64
        import json
        import urllib.request

        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            url = (self.workdir / "etcd-url").read_text().strip() + path
            req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=10) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer

        key = base64.b64encode(b"/registry").decode()
        revision = int(call("/v3/kv/range", {"key": key, "count_only": True})["header"]["revision"])
        call("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def stop(self) -> None:
        subprocess.run([str(self.workdir / "stop.sh")], check=False, timeout=60)

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / "apiserver.log").read_text()[-chars:]
        return ""


def start_real_kube(
    binaries: Path,
    workdir: Path,
    extra_users: tuple[KubeUser, ...] = (OPERATOR_SA,),
    apiserver_args: tuple[str, ...] = (),
) -> RealKube:
    """Start etcd + kube-apiserver with ``workdir`` as their state directory; the static tokens of
    ``extra_users`` are accepted next to the admin's, and ``apiserver_args`` are added to the server's
    flags. Raises RuntimeError with the server's log when it does not become ready."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KUBE_READY_TIMEOUT": os.environ.get("KUBE_READY_TIMEOUT", "90")}
    env["SPUR_KUBE_EXTRA_TOKENS"] = "\n".join(u.csv_line() for u in extra_users)
    env["SPUR_KUBE_APISERVER_ARGS"] = " ".join(apiserver_args)
    proc = subprocess.run(
        ["bash", str(RUN_SCRIPT), str(binaries), str(workdir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kube-apiserver did not start:\n{proc.stderr[-3000:]}")
    kubeconfig = Path(proc.stdout.strip().splitlines()[-1])
    server = re.search(r"server: (https://\S+)", kubeconfig.read_text())
    assert server is not None, kubeconfig.read_text()
    return RealKube(
        workdir=workdir,
        kubeconfig=kubeconfig,
        server=server.group(1),
        ca_file=workdir / "certs" / "apiserver.crt",
        users={u.name: u for u in extra_users},
    )


@contextlib.contextmanager
def real_kube(workdir: Path, apiserver_args: tuple[str, ...] = ()) -> Iterator[RealKube]:
    """Build if needed, start (with ``apiserver_args`` added to the server's flags), yield, stop."""
    kube = start_real_kube(ensure_built(), workdir, apiserver_args=apiserver_args)
    try:
        yield kube
    finally:
        kube.stop()


def namespace_name(test_name: str) -> str:
    """A fresh namespace (DNS label) for one test: its name, shortened, and a random suffix."""
    slug = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"t-{slug}-{secrets.token_hex(3)}"
