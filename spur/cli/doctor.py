"""``spur doctor``: which controller the commands talk to, from which configuration, and what may
shadow Spur's commands (another Slurm installed ahead of Spur on PATH).

Prints one ``key: value`` line per fact, then ``warning:`` lines; exits 0 when the controller
answers, 1 when it does not. The checks themselves are pure functions over the environment, the
PATH and the file system (:func:`config_source`, :func:`shadowed_commands`), tested without a cluster.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

USAGE = "Usage: spur doctor"
SYSTEM_CONF = "/etc/spur/spur.conf"
SLURM_CONFS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf")


def option_docs():  # -> list[OptionDoc]
    return []


def config_source(
    environ: Mapping[str, str], exists: Callable[[str], bool] = os.path.exists
) -> tuple[str, str]:
    """(config file or "", why it is the one): $SPUR_CONF, else /etc/spur/spur.conf, else none."""
    if environ.get("SPUR_CONF"):
        return environ["SPUR_CONF"], "from $SPUR_CONF"
    if exists(SYSTEM_CONF):
        return SYSTEM_CONF, "the system default"
    return "", "none found: built-in defaults ($SPUR_CONF unset, no /etc/spur/spur.conf)"


def controller_source(environ: Mapping[str, str], conf: str) -> str:
    """Where the controller address comes from, in the order the commands look."""
    if environ.get("SPUR_CONTROLLER"):
        return "$SPUR_CONTROLLER"
    if conf:
        return f"[agent] controller in {conf} (default localhost:6817 if unset)"
    return "built-in default"


def is_spur_script(path: str) -> bool:
    """Whether the executable at ``path`` is one of Spur's entry points."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b"spur.cli.main" in head or b"spur.cli" in head


def shadowed_commands(
    names: list[str], path: str, spur_dir: str, is_spur: Callable[[str], bool] = is_spur_script
) -> list[tuple[str, str]]:
    """Slurm command names whose first match on ``path`` is not Spur's: (name, path found)."""
    out = []
    for name in names:
        found = shutil.which(name, path=path)
        if (
            found
            and not is_spur(found)
            and os.path.dirname(os.path.realpath(found)) != os.path.realpath(spur_dir)
        ):
            out.append((name, found))
    return out


def main(argv: list[str]) -> int:
    from spur.cli.cmdinfo import handle_meta
    from spur.version import version_line

    if argv[:1] and argv[0] in ("--help", "-h", "--usage", "-V", "--version"):
        return handle_meta("doctor", "--help" if argv[0] == "-h" else argv[0])
    if argv:
        print(f"spur doctor: error: unexpected argument '{argv[0]}'\n{USAGE}", file=sys.stderr)
        return 1
    from spur.cli.client import CliError, controller_targets, with_controller
    from spur.cli.verbs import SLURM_NAMES

    environ = os.environ
    print(f"version: {version_line()}")
    spur_dir = str(Path(sys.argv[0]).resolve().parent) if sys.argv and sys.argv[0] else ""
    print(f"commands: {spur_dir or '(unknown)'}")
    conf, why = config_source(environ)
    print(f"config file: {conf or '(none)'} ({why})" if conf else f"config file: {why}")
    warnings: list[str] = []
    try:
        targets = controller_targets()
    except CliError as exc:
        print(f"controller: cannot read the configuration: {exc.message}")
        return 1
    print(f"controller: {','.join(targets)} ({controller_source(environ, conf)})")
    ok = True
    try:
        from spur.rpc.proto import spur_pb2 as pb

        resp = with_controller(lambda stub: stub.GetControllers(pb.Empty(), timeout=5), timeout=5)
        for c in resp.controllers:
            print(f"controller {c.node_id}: {c.address} {c.role} {'UP' if c.healthy else 'DOWN'}")
    except CliError as exc:
        ok = False
        warnings.append(
            f"no controller answers at {','.join(targets)}: {exc.message} "
            "(start spurctld, or set SPUR_CONTROLLER / SPUR_CONF to the right one)"
        )
    for name, found in shadowed_commands(sorted(SLURM_NAMES), environ.get("PATH", ""), spur_dir):
        warnings.append(
            f"'{name}' runs {found}, which is not Spur's: another Slurm comes first on PATH "
            f"(put {spur_dir} first, or use 'spur {SLURM_NAMES[name]}')"
        )
    for slurm_conf in SLURM_CONFS:
        if os.path.exists(slurm_conf):
            warnings.append(
                f"{slurm_conf} exists: that is another Slurm's configuration, Spur does not read it"
            )
    for line in warnings:
        print(f"warning: {line}")
    return 0 if ok else 1
