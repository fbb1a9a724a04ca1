"""A test double of ``systemctl``: the subset spurd uses, with units that really run.

Standard library only (runs under any ``python3`` through the ``bin/systemctl`` wrapper). Everything
lies under ``$FAKE_SYSTEMD_ROOT`` (required): unit files are read from ``$FAKE_SYSTEMD_ROOT/units``
(or ``$FAKE_SYSTEMD_UNIT_DIR``), runtime state lives in ``$FAKE_SYSTEMD_ROOT/state``.

Commands: ``daemon-reload``, ``enable``/``disable`` (``--now`` too), ``start``/``stop``/``restart``,
``is-active``, ``is-enabled``, ``show UNIT [-p A,B | --property=A]``. As in systemd, ``start`` needs
a loaded unit (one that was present at the last ``daemon-reload``), ``is-active`` prints
``active``/``activating``/``inactive``/``failed`` and exits 0 only for active, ``is-enabled`` exits 0
only for enabled.

``start`` spawns a supervisor in its own session (so the unit outlives whoever called systemctl, as a
real unit outlives spurd) that runs ``ExecStart=`` with ``Environment=`` applied, restarts it per
``Restart=`` (``always``/``on-failure``, ``RestartSec=``), and on ``stop`` sends SIGTERM, then SIGKILL
after ``TimeoutStopSec=`` (default 10 s). The main process's output goes to ``state/<unit>/output``.
:func:`shutdown` stops every unit under a root (test cleanup).

Where real systemd 252 answers otherwise (measured side by side; integration/test_systemd_k0s.py runs
spurd's k0s units on the real one), the double is simpler, and no spurd code relies on the difference:

- ``start``/``enable`` of a unit file written after the last ``daemon-reload``: real systemd loads it
  on demand (exit 0); the double refuses (exit 5, "not found").
- ``start`` of a unit whose process cannot exec or exits at once: real systemd returns 0 (the fork
  worked; ``Type=simple``) and, with ``Restart=``, the unit waits as ``activating``/``auto-restart``
  with ``Result=exit-code`` (``ExecMainStatus=203`` for a missing binary); the double fails the start
  (exit 1) and reads ``failed``.
- ``stop``/``disable`` of an unknown unit: real exit 5 ("not loaded") / 1 ("does not exist"); the
  double exits 0. ``is-enabled`` of an unknown unit: real exit 1, the double 4.
- A main process killed by ``stop``'s SIGTERM: real ``ExecMainStatus=15``; the double keeps 0. One that
  exits non-zero on SIGTERM leaves the real unit ``failed`` (``Result=exit-code``); the double
  ``inactive``. Units without ``[Install]`` are ``static`` in real systemd, ``disabled`` here.
- Real units get systemd's environment; the double's supervisor passes on its caller's.
- ``show -p A,B`` prints in systemd's own property order, not the order asked.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

PROPS = ("Id", "LoadState", "ActiveState", "SubState", "MainPID", "UnitFileState", "FragmentPath",
         "ExecMainStatus", "NRestarts", "Description", "Result")


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(code)


def root() -> Path:
    value = os.environ.get("FAKE_SYSTEMD_ROOT")
    if not value:
        fail("fake systemctl: FAKE_SYSTEMD_ROOT is not set (the test double never touches real systemd)")
    return Path(value)


def unit_dir(base: Path) -> Path:
    return Path(os.environ.get("FAKE_SYSTEMD_UNIT_DIR") or base / "units")


def state_dir(base: Path, unit: str) -> Path:
    return base / "state" / unit


def full_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def parse_unit(path: Path) -> dict[str, list[str]]:
    """``Key=value`` lines of every section (later values of a key append, as systemd lists do)."""
    keys: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def loaded(base: Path) -> dict[str, str]:
    try:
        return json.loads((base / "state/loaded.json").read_text())
    except (OSError, ValueError):
        return {}


def enabled(base: Path) -> set[str]:
    try:
        return set(json.loads((base / "state/enabled.json").read_text()))
    except (OSError, ValueError):
        return set()


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def runtime(base: Path, unit: str) -> dict:
    """Current state of ``unit``; a supervisor that died without recording it reads as failed."""
    try:
        st = json.loads((state_dir(base, unit) / "status.json").read_text())
    except (OSError, ValueError):
        return {"active": "inactive", "sub": "dead", "main_pid": 0, "exit": 0, "restarts": 0, "result": "success"}
    sup = int(st.get("supervisor", 0))
    if st["active"] in ("active", "activating", "deactivating") and sup and not alive(sup):
        st = {**st, "active": "failed", "sub": "failed", "main_pid": 0, "result": "signal"}
    return st


def require_loaded(base: Path, unit: str) -> str:
    path = loaded(base).get(unit)
    if path is None or not Path(path).exists():
        fail(f"Failed to start {unit}: Unit {unit} not found.", 5)
    return path


def cmd_daemon_reload(base: Path) -> int:
    units = {p.name: str(p) for p in sorted(unit_dir(base).glob("*.service"))} if unit_dir(base).is_dir() else {}
    write_json(base / "state/loaded.json", units)
    return 0


def cmd_enable(base: Path, units: list[str], on: bool) -> int:
    current = enabled(base)
    for unit in units:
        if on:
            require_loaded(base, unit)
            current.add(unit)
            print(f"Created symlink /etc/systemd/system/multi-user.target.wants/{unit} → {loaded(base)[unit]}.",
                  file=sys.stderr)
        elif unit in current:
            current.discard(unit)
            print(f"Removed /etc/systemd/system/multi-user.target.wants/{unit}.", file=sys.stderr)
    write_json(base / "state/enabled.json", sorted(current))
    return 0


def cmd_start(base: Path, unit: str) -> int:
    path = require_loaded(base, unit)
    if runtime(base, unit)["active"] in ("active", "activating"):
        return 0
    sdir = state_dir(base, unit)
    sdir.mkdir(parents=True, exist_ok=True)
    write_json(sdir / "status.json", {"active": "activating", "sub": "start", "main_pid": 0, "supervisor": 0,
                                      "exit": 0, "restarts": 0, "result": "success"})
    log = open(sdir / "output", "ab")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--supervise", unit, path],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=os.environ.copy(),
    )
    log.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = runtime(base, unit)
        if st["active"] in ("active", "failed") or proc.poll() is not None:
            break
        time.sleep(0.02)
    st = runtime(base, unit)
    if st["active"] != "active":
        fail(f"Job for {unit} failed because the control process exited with error code.\n"
             f'See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.', 1)
    return 0


def cmd_stop(base: Path, unit: str) -> int:
    st = runtime(base, unit)
    sup = int(st.get("supervisor", 0))
    if alive(sup):
        os.kill(sup, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while alive(sup) and time.monotonic() < deadline:
            time.sleep(0.02)
    st = runtime(base, unit)
    if st["active"] != "inactive" and st["active"] != "failed":
        write_json(state_dir(base, unit) / "status.json", {**st, "active": "inactive", "sub": "dead", "main_pid": 0})
    return 0


def cmd_show(base: Path, unit: str, props: list[str]) -> int:
    st = runtime(base, unit)
    path = loaded(base).get(unit)
    keys = parse_unit(Path(path)) if path and Path(path).exists() else {}
    values = {
        "Id": unit,
        "LoadState": "loaded" if path and Path(path).exists() else "not-found",
        "ActiveState": st["active"],
        "SubState": st["sub"],
        "MainPID": str(st.get("main_pid", 0)),
        "UnitFileState": "enabled" if unit in enabled(base) else ("disabled" if path else ""),
        "FragmentPath": path or "",
        "ExecMainStatus": str(st.get("exit", 0)),
        "NRestarts": str(st.get("restarts", 0)),
        "Description": (keys.get("Description") or [""])[-1],
        "Result": st.get("result", "success"),
    }
    for prop in props or list(PROPS):
        if prop in values:
            print(f"{prop}={values[prop]}")
    return 0


def supervise(unit: str, path: str) -> int:
    """The unit's supervisor: run ExecStart, restart per Restart=, stop on SIGTERM."""
    base = root()
    sdir = state_dir(base, unit)
    keys = parse_unit(Path(path))
    argv = shlex.split(keys["ExecStart"][-1].lstrip("-@+!"))
    env = os.environ.copy()
    for assignment in keys.get("Environment", []):
        for item in shlex.split(assignment):
            k, _, v = item.partition("=")
            env[k] = v
    restart = (keys.get("Restart") or ["no"])[-1]
    restart_sec = float((keys.get("RestartSec") or ["0.1"])[-1].rstrip("s"))
    stop_timeout = float((keys.get("TimeoutStopSec") or ["10"])[-1].rstrip("s"))
    stopping = False
    child: subprocess.Popen | None = None

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    restarts = 0
    status = {"supervisor": os.getpid(), "restarts": 0, "exit": 0, "result": "success"}
    while True:
        try:
            child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            print(f"{unit}: failed to execute {argv[0]}: {exc.strerror}", flush=True)
            write_json(sdir / "status.json", {**status, "active": "failed", "sub": "failed", "main_pid": 0,
                                              "exit": 203, "result": "exit-code", "supervisor": 0})
            return 1
        write_json(sdir / "status.json", {**status, "active": "active", "sub": "running", "main_pid": child.pid})
        while child.poll() is None and not stopping:
            time.sleep(0.05)
        if stopping:
            write_json(sdir / "status.json", {**status, "active": "deactivating", "sub": "stop-sigterm",
                                              "main_pid": child.pid})
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(stop_timeout)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            write_json(sdir / "status.json", {**status, "active": "inactive", "sub": "dead", "main_pid": 0,
                                              "exit": child.returncode, "supervisor": 0})
            return 0
        code = child.returncode
        status = {**status, "exit": code, "result": "success" if code == 0 else "exit-code"}
        if restart == "always" or (restart == "on-failure" and code != 0):
            restarts += 1
            status["restarts"] = restarts
            write_json(sdir / "status.json", {**status, "active": "activating", "sub": "auto-restart",
                                              "main_pid": 0})
            deadline = time.monotonic() + restart_sec
            while time.monotonic() < deadline and not stopping:
                time.sleep(0.05)
            if stopping:
                write_json(sdir / "status.json", {**status, "active": "inactive", "sub": "dead", "main_pid": 0,
                                                  "supervisor": 0})
                return 0
            continue
        final = "inactive" if code == 0 else "failed"
        write_json(sdir / "status.json", {**status, "active": final, "sub": "dead" if code == 0 else "failed",
                                          "main_pid": 0, "supervisor": 0})
        return 0


def shutdown(base: Path) -> None:
    """Stop every unit with a live supervisor under ``base`` (test cleanup)."""
    for status_file in (base / "state").glob("*/status.json"):
        try:
            sup = int(json.loads(status_file.read_text()).get("supervisor", 0))
        except (OSError, ValueError):
            continue
        if alive(sup):
            os.kill(sup, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while alive(sup) and time.monotonic() < deadline:
                time.sleep(0.02)
            if alive(sup):
                os.killpg(sup, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--supervise"]:
        return supervise(argv[1], argv[2])
    props: list[str] = []
    words: list[str] = []
    now = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-p", "--property"):
            props += argv[i + 1].split(",")
            i += 1
        elif arg.startswith("--property="):
            props += arg.split("=", 1)[1].split(",")
        elif arg == "--now":
            now = True
        elif arg in ("--quiet", "-q", "--no-pager", "--system", "--no-block"):
            pass
        elif arg.startswith("-"):
            fail(f"systemctl: unrecognized option '{arg}' (fake systemctl)")
        else:
            words.append(arg)
        i += 1
    if not words:
        fail("fake systemctl: a command is required")
    base = root()
    command, units = words[0], [full_name(u) for u in words[1:]]
    if command == "daemon-reload":
        return cmd_daemon_reload(base)
    if not units:
        fail(f"Too few arguments for {command}.")
    if command in ("enable", "disable"):
        rc = cmd_enable(base, units, command == "enable")
        for unit in units if now else []:
            (cmd_start if command == "enable" else cmd_stop)(base, unit)
        return rc
    if command == "start":
        return max(cmd_start(base, u) for u in units)
    if command == "stop":
        return max(cmd_stop(base, u) for u in units)
    if command == "restart":
        for unit in units:
            cmd_stop(base, unit)
        return max(cmd_start(base, u) for u in units)
    if command == "is-active":
        states = [runtime(base, u)["active"] for u in units]
        for s in states:
            print(s)
        return 0 if all(s == "active" for s in states) else 3
    if command == "is-enabled":
        on = enabled(base)
        known = loaded(base)
        rc = 0
        for unit in units:
            if unit in on:
                print("enabled")
            elif unit in known:
                print("disabled")
                rc = 1
            else:
                print(f"Failed to get unit file state for {unit}: No such file or directory", file=sys.stderr)
                rc = 4
        return rc
    if command == "show":
        for unit in units:
            cmd_show(base, unit, props)
        return 0
    fail(f"Unknown command verb '{command}' (fake systemctl knows the subset spurd uses).")
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
