"""Real Slurm 24.11 (slurmctld, slurmd, slurmdbd, slurmrestd) in a chroot, for side-by-side REST tests.

The chroot is built and run by ``shared/tools/slurm24-chroot.sh`` (beside the clone, as CI lays it
out): Debian 13's Slurm 24.11 packages, debootstrapped once per machine into :func:`cache_dir`
(``SPUR_SLURM24_DIR``, default ``/var/cache/spur-test/slurm24``, outside the clone; about 300 MB and
two minutes; ``scripts/setup.sh`` builds it ahead). Its daemons listen on fixed ports (slurmctld 7917,
slurmd 7918, slurmdbd 7919, slurmrestd 7920), so one test session at a time uses it:
:func:`real_slurm24` holds an exclusive ``flock`` on :func:`lock_path` from before the start until
after the stop (the same lock serialises the build in setup.sh). The chroot's state (slurmctld's
StateSaveLocation, the accounting database) outlives a run, so its job ids grow from run to run:
tests pick out the jobs they submitted.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from integration.harness import wait_for

ROOT = Path(__file__).resolve().parent.parent
REST_PORT = 7920


def tool_path() -> Path:
    """The chroot tool, in ``shared/tools`` beside the clone."""
    return ROOT.parent / "shared" / "tools" / "slurm24-chroot.sh"


def cache_dir() -> Path:
    """The chroot's directory (outside the clone: one build per machine)."""
    return Path(os.environ.get("SPUR_SLURM24_DIR", "/var/cache/spur-test/slurm24"))


def lock_path() -> Path:
    """The lock serialising the chroot's build and use (beside, not inside, the chroot)."""
    return cache_dir().parent / "slurm24.lock"


def built() -> bool:
    return (cache_dir() / "usr" / "sbin" / "slurmrestd").is_file()


def why_unavailable() -> str | None:
    """Why real Slurm 24.11 cannot run here (None when it can): the tool must be beside the clone,
    and the chroot needs root (chroot, mounts) and, to be built, debootstrap or apt-get."""
    if not tool_path().is_file():
        return f"{tool_path()} is missing (the shared tools are laid out beside the clone in CI)"
    if os.geteuid() != 0:
        return "the Slurm 24.11 chroot needs root (chroot, bind mounts)"
    if not built() and shutil.which("debootstrap") is None and shutil.which("apt-get") is None:
        return "building the Slurm 24.11 chroot needs debootstrap (or apt-get to install it)"
    return None


@dataclass
class Slurm24:
    """A running real Slurm 24.11: ``url`` is slurmrestd's base URL, ``token`` a root JWT."""

    directory: Path
    token: str
    url: str = f"http://127.0.0.1:{REST_PORT}"

    def http(self) -> httpx.Client:
        headers = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": self.token}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command inside the chroot (``sacctmgr``, ``scancel``, ...), as root."""
        proc = _tool("run", self.directory, *argv, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log", "slurmdbd.log", "slurmrestd.log"):
            f = self.directory / "var" / "log" / "slurm" / name
            if f.exists():
                out.append(f"--- {name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)


def _tool(action: str, directory: Path, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tool_path()), action, str(directory), *argv],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@contextmanager
def _locked(path: Path, timeout: float) -> Iterator[None]:
    """An exclusive flock on ``path``, waited for up to ``timeout`` seconds (another session's run,
    or setup.sh's build, holds it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{path} stayed locked for {timeout:.0f} s (another Slurm 24.11 run?)") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def chroot_processes(directory: Path) -> list[int]:
    """The processes running inside the chroot at ``directory`` (their root is it)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "root") == str(directory):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def _stop(directory: Path) -> None:
    """The tool's ``stop``, then whatever it does not stop (munged) is ended: every process whose
    root is the chroot was started by its ``start``. SIGTERM, and SIGKILL for one still there after
    30 s (MariaDB flushing on a loaded machine)."""
    _tool("stop", directory, timeout=60)
    for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        for pid in chroot_processes(directory):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        try:
            wait_for(lambda: not chroot_processes(directory), timeout=grace, interval=0.2, what="")
            return
        except AssertionError:
            continue
    raise AssertionError(f"processes in {directory} outlived SIGKILL: {chroot_processes(directory)}")


def _ready(slurm: Slurm24) -> bool:
    """slurmrestd answers with the token, slurmctld sees its node idle and slurmdbd answers."""
    with slurm.http() as http:
        nodes = http.get("/slurm/v0.0.42/nodes/")
        if nodes.status_code != 200:
            return False
        states = [n["state"] for n in nodes.json()["nodes"]]
        if not states or any("IDLE" not in s for s in states):
            return False
        return http.get("/slurmdb/v0.0.42/ping/").status_code == 200


@contextmanager
def real_slurm24(lock_timeout: float = 600, start_timeout: float = 900) -> Iterator[Slurm24]:
    """Start real Slurm 24.11 from :func:`cache_dir` (building the chroot first when absent), wait
    until slurmrestd, the node and slurmdbd answer (root's jobs left from an earlier run cancelled),
    yield it; stop it (the tool's ``stop``: daemons killed, mounts released) whatever happened. Holds :func:`lock_path` throughout. A failed start
    raises AssertionError with the tool's output and the daemons' logs."""
    directory = cache_dir()
    with _locked(lock_path(), lock_timeout):
        _stop(directory)  # a run killed before its stop left daemons behind
        try:
            started = _tool("start", directory, timeout=start_timeout)
            if not built():
                raise AssertionError(f"building the Slurm 24.11 chroot failed:\n{started.stdout}\n{started.stderr}")
            # the jobs of a run killed before its teardown would keep the node busy
            _tool("run", directory, "scancel", "-u", "root", timeout=60)
            token = _tool("token", directory).stdout.strip()
            slurm = Slurm24(directory, token)
            if not token:
                raise AssertionError(f"no token from the chroot:\n{started.stdout}\n{slurm.log_tail()}")
            try:
                wait_for(lambda: _ready(slurm), timeout=90, interval=0.5, what="Slurm 24.11 to answer")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{started.stdout}\n{started.stderr}\n{slurm.log_tail()}") from None
            yield slurm
        finally:
            _stop(directory)


def build() -> int:
    """Build the chroot once for this machine (scripts/setup.sh): the tool's ``start`` (which
    debootstraps when the chroot is absent), then its ``stop``, under the lock. 0 when built."""
    reason = why_unavailable()
    if reason is not None:
        print(f"not building the Slurm 24.11 chroot: {reason}")
        return 0
    directory = cache_dir()
    with _locked(lock_path(), timeout=1200):
        if built():  # built while this waited for the lock
            return 0
        try:
            started = _tool("start", directory, timeout=900)
            print(started.stdout, started.stderr)
        finally:
            _stop(directory)
    if not built():
        print(f"building the Slurm 24.11 chroot into {directory} failed")
        return 1
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m integration.slurm24 build")
    sys.exit(build())
