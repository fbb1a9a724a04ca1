"""The container image without a Docker engine: the Dockerfile's build stage is run as written
(its COPY and RUN lines, with /src and /wheels under a temporary directory) in a fresh virtualenv,
its runtime stage's install and entry-point check likewise in another fresh one; and the
Dockerfile's stages are checked to name the commands Spur installs.

``spur-k8s-operator`` is not a console script yet: it joins the expected commands (and this test
then requires the Dockerfile to name it) as soon as pyproject.toml declares it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "containers" / "Dockerfile"
#: The daemons and the CLI the image must carry (the operator once it exists).
IMAGE_COMMANDS = ("spurctld", "spurd", "spur", "spur-k8s-operator")


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) of a Dockerfile: comments dropped, continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        elif keyword == "FROM":
            m = re.match(r"^(\S+)(?:\s+AS\s+(\S+))?$", rest.strip(), re.IGNORECASE)
            assert m, line
            base = re.sub(r"\$\{(\w+)\}", lambda v: args.get(v.group(1), ""), m.group(1))
            stages.append(Stage(m.group(2) or str(len(stages)), base))
        else:
            assert stages, f"instruction before FROM: {line}"
            stages[-1].instructions.append((keyword, rest.strip()))
    return args, stages


def _stages() -> dict[str, Stage]:
    return {s.name: s for s in parse_dockerfile(DOCKERFILE.read_text())[1]}


def _console_scripts() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


def _expected_commands() -> list[str]:
    return [c for c in IMAGE_COMMANDS if c in _console_scripts()]


def _commands_checked(stage: Stage) -> list[str]:
    """The commands a RUN of ``stage`` invokes to check them (``<command> ... --help``)."""
    found = []
    for run in stage.args("RUN"):
        for part in run.split("&&"):
            words = part.split()
            if words and "--help" in words and words[0] in IMAGE_COMMANDS:
                found.append(words[0])
    return found


def test_root_dockerfile_is_the_containers_one() -> None:
    assert (ROOT / "Dockerfile").read_bytes() == DOCKERFILE.read_bytes()
    assert "docker build --target runtime -t spur:<tag> ." in DOCKERFILE.read_text()


def test_stages_build_wheels_and_a_slim_non_root_runtime_naming_the_commands() -> None:
    stages = _stages()
    assert list(stages) == ["build", "runtime"]
    build, runtime = stages["build"], stages["runtime"]
    assert runtime.base.endswith("-slim") and build.base == runtime.base
    (wheel_run,) = build.args("RUN")
    assert "pip wheel" in wheel_run and "--wheel-dir /wheels ." in wheel_run
    assert "for plugin in plugins/*/; do pip wheel" in wheel_run and "--no-deps" in wheel_run
    assert any(a.startswith("--from=build /wheels") for a in runtime.args("COPY"))
    installs = [r for r in runtime.args("RUN") if "pip install" in r]
    assert len(installs) == 1 and "--no-index --find-links=/wheels /wheels/*.whl" in installs[0]
    everything = " ".join(runtime.args("RUN"))
    for compiler in ("gcc", "build-essential", "apt-get", "clang", "g++"):
        assert compiler not in everything
    (user,) = runtime.args("USER")
    assert user.isdigit() and int(user) != 0
    assert any("useradd" in r and f"--uid {user}" in r for r in runtime.args("RUN"))
    assert sorted(_commands_checked(runtime)) == sorted(_expected_commands())
    cmd = runtime.args("CMD")[0]
    assert cmd.startswith('["spurctld"')


def _copy_into(src_root: Path, stage: Stage) -> None:
    """The build stage's COPY lines, from the repository into ``src_root`` (its WORKDIR)."""
    for copy in stage.args("COPY"):
        *sources, dest = copy.split()
        target = src_root / dest
        for source in sources:
            path = ROOT / source
            if path.is_dir():
                shutil.copytree(
                    path, src_root / dest, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
                )
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target / path.name)


def _sh(script: str, cwd: Path, venv: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "SPUR_CONF")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run(
        ["sh", "-ec", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, (
        f"{script}\nexited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return path


@pytest.mark.slow
def test_build_and_runtime_stages_run_as_written(tmp_path: Path) -> None:
    stages = _stages()
    wheels = tmp_path / "wheels"
    src = tmp_path / "src"
    src.mkdir()
    _copy_into(src, stages["build"])

    build_env = _venv(tmp_path / "build-env")
    for run in stages["build"].args("RUN"):
        _sh(run.replace("/wheels", str(wheels)), src, build_env)
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert any(n.startswith("spur-0") for n in built) and any(
        n.startswith("spur_sched_backfill-") for n in built
    )
    for plugin in (ROOT / "plugins").iterdir():
        if (plugin / "pyproject.toml").exists():
            dist = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
            assert any(n.startswith(f"{dist}-") for n in built), (dist, built)

    runtime_env = _venv(tmp_path / "runtime-env")
    for run in stages["runtime"].args("RUN"):
        if "useradd" in run:
            continue  # creates the image's system account: checked statically above
        _sh(run.replace("/wheels", str(wheels)), tmp_path, runtime_env)
    assert not wheels.exists()  # the install step cleaned up after itself

    for script in _console_scripts():
        assert (runtime_env / "bin" / script).exists(), script
    out = _sh("spurctld --help", tmp_path, runtime_env).stdout
    assert out.startswith("usage: spurctld")
    installed = _sh("pip list --format=freeze", tmp_path, runtime_env).stdout.lower()
    assert (
        "spur-sched-backfill==" in installed and "pytest" not in installed and "grpcio-tools" not in installed
    )
    plugins = _sh(
        "python -c \"from importlib.metadata import entry_points; print(sorted(e.name for e in entry_points(group='spur')))\"",
        tmp_path,
        runtime_env,
    ).stdout
    assert "scheduler.backfill" in plugins
