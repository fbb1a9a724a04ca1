"""Run the real ``kubectl`` against the double (or a real API server, with ``config``): a kubeconfig with a token user, a fresh HOME per call.

A fresh HOME per call keeps kubectl's discovery cache (``$HOME/.kube/cache``) from carrying one
call's view of the API (e.g. before a CRD existed) into the next. ``--validate=false`` is not added
here: the double serves no OpenAPI document, so callers pass it to ``apply``/``create -f``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

KUBECTL = shutil.which("kubectl")


def kubeconfig_text(url: str, token: str, namespace: str = "default") -> str:
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: double\n"
        "  cluster:\n"
        f"    server: {url}\n"
        "contexts:\n"
        "- name: double\n"
        "  context:\n"
        "    cluster: double\n"
        "    user: tester\n"
        f"    namespace: {namespace}\n"
        "current-context: double\n"
        "users:\n"
        "- name: tester\n"
        "  user:\n"
        f"    token: {token}\n"
    )


@dataclass
class Kubectl:
    """``kubectl`` bound to one double. ``root`` holds the kubeconfig and the per-call HOMEs."""

    url: str
    root: Path
    token: str = "spur-test-token"
    cwd: Path | None = None
    #: A whole kubeconfig instead of the double's (the real API server's: https, its CA, a namespace).
    config: str | None = field(default=None, repr=False)
    kubeconfig: Path = field(init=False)

    def __post_init__(self) -> None:
        if KUBECTL is None:
            raise RuntimeError("kubectl is not installed")
        self.root.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = self.root / "kubeconfig"
        self.kubeconfig.write_text(self.config or kubeconfig_text(self.url, self.token))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env["HOME"] = tempfile.mkdtemp(prefix="home-", dir=self.root)
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def argv(self, args: tuple[str, ...] | list[str]) -> list[str]:
        assert KUBECTL is not None
        return [KUBECTL, *args]

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """Run one kubectl command synchronously; ``check`` fails with its output on a non-zero exit."""
        proc = subprocess.run(
            self.argv(args),
            env=self.env(),
            cwd=self.cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    async def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """The same from a Trio test (the double may be served by the same Trio run)."""
        import trio

        with trio.fail_after(timeout):
            proc = await trio.run_process(
                self.argv(args),
                env=self.env(),
                cwd=self.cwd,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        result = subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result


#: The example manifests of docs/kubernetes.md.
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "k8s"
