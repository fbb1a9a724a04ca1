"""A test double of the ``k0s`` executable, behaving like k0s at the interface Spur uses.

Standard library only, so it runs under any ``python3`` (the ``bin/k0s`` wrapper). Every path it
touches lies under ``$FAKE_K0S_ROOT`` (required: the double refuses to run without it, so a test can
never write ``/var/lib/k0s``); ``--data-dir`` defaults to ``$FAKE_K0S_ROOT/var/lib/k0s``.

Commands:

- ``controller [--single] [--config F] [--token-file F] [--data-dir D]``: long-running until SIGTERM.
  A first controller creates the cluster CA (a random fingerprint in ``pki/ca.fingerprint``); a
  controller started with ``--token-file`` joins an existing control plane instead and takes its CA
  from it. Every controller serves the join API (HTTP) on ``spec.api.address`` (else
  ``$FAKE_K0S_ADDRESS``, else 127.0.0.1) and
  ``spec.api.k0sApiPort`` from the config (default 9443; ``$FAKE_K0S_JOIN_PORT`` overrides, ``0`` =
  any free port); ``GET /ca`` answers the CA fingerprint, ``POST /join`` admits a token's secret.
- ``worker --token-file F [--data-dir D]``: verifies the token against the cluster's kubernetes-ca
  (``failed to verify kubernetes-ca`` and exit 1 when the token was minted against another CA), then
  stays up until SIGTERM.
- ``token create --role=worker|controller``: mints a token on a running controller. The token is
  base64 of JSON ``{"role", "url", "ca", "secret"}``: it embeds the cluster CA fingerprint.
- ``kubeconfig admin``: prints the cluster-admin kubeconfig (needs an initialised controller); its
  server is ``$FAKE_K0S_API_URL`` (a test's Kubernetes API: the double, or a real kube-apiserver) or
  ``https://localhost:6443``. For a real server, ``$FAKE_K0S_API_CA_FILE`` (its CA, PEM) and
  ``$FAKE_K0S_API_TOKEN_FILE`` (a token it accepts) replace the fake CA and token.
- ``status``: the running process's role and pid (``Error: ... status.sock`` and exit 1 when none).
- ``reset``: refuses while k0s runs; otherwise wipes the data dir.
- ``version``: prints ``$FAKE_K0S_VERSION`` or the built-in version.

Each long-running process records what it did in ``<data-dir>/fake/`` (argv, the config it loaded,
joined nodes) so tests can assert on it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import http.server
import json
import os
import secrets
import signal
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

VERSION = "v1.36.2+k0s.0"


def fail(message: str, code: int = 1) -> None:
    print(f"Error: {message}", file=sys.stderr)
    raise SystemExit(code)


def root() -> Path:
    value = os.environ.get("FAKE_K0S_ROOT")
    if not value:
        fail("fake k0s: FAKE_K0S_ROOT is not set (the test double never touches real system paths)")
    return Path(value)


def parse(argv: list[str]) -> tuple[list[str], dict[str, str | bool]]:
    """Split argv into positional words and ``--flag[=value]`` / ``--flag value`` options."""
    words: list[str] = []
    opts: dict[str, str | bool] = {}
    valued = {"--config", "-c", "--token-file", "--data-dir", "--role", "--expiry"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-"):
            key, sep, value = arg.partition("=")
            if sep:
                opts[key] = value
            elif key in valued:
                if i + 1 >= len(argv):
                    fail(f"flag needs an argument: {key}")
                opts[key] = argv[i + 1]
                i += 1
            else:
                opts[key] = True
        else:
            words.append(arg)
        i += 1
    if "-c" in opts:
        opts["--config"] = opts.pop("-c")
    return words, opts


def data_dir(opts: dict[str, str | bool]) -> Path:
    value = opts.get("--data-dir")
    if isinstance(value, str):
        path = Path(value)
        if not str(path.resolve()).startswith(str(root().resolve())):
            fail(f"fake k0s: data dir {path} is outside FAKE_K0S_ROOT")
        return path
    return root() / "var/lib/k0s"


def load_config(path: str | None) -> dict:
    """The k0s config (``spur`` writes JSON, which is valid YAML); {} when none is given."""
    if not path:
        return {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        fail(f"failed to read config {path}: {exc.strerror}")
    try:
        return json.loads(text)
    except ValueError:
        fail(f"failed to parse config {path}: the fake k0s reads JSON-formatted YAML only")
    return {}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_status(ddir: Path) -> dict | None:
    try:
        status = json.loads((ddir / "run/status.json").read_text())
    except (OSError, ValueError):
        return None
    return status if alive(int(status.get("pid", 0))) else None


def decode_token(path: str) -> dict:
    try:
        raw = Path(path).read_text().strip()
    except OSError as exc:
        fail(f"failed to read token file {path}: {exc.strerror}")
    try:
        token = json.loads(base64.b64decode(raw.encode(), validate=True))
        assert isinstance(token, dict) and {"role", "url", "ca", "secret"} <= token.keys()
    except Exception:
        fail("failed to decode join token: invalid token")
    return token


def join(token: dict, role: str) -> str:
    """Verify the cluster CA against the token and present its secret; return the CA fingerprint."""
    if token["role"] != role:
        fail(f"join token is for role {token['role']!r}, not {role!r}")
    try:
        with urllib.request.urlopen(token["url"] + "/ca", timeout=5) as resp:
            ca = resp.read().decode().strip()
    except (urllib.error.URLError, OSError) as exc:
        fail(f"failed to connect to the join API at {token['url']}: {exc}")
    if ca != token["ca"]:
        fail(
            f"failed to verify kubernetes-ca: the join API at {token['url']} presents CA "
            f"{ca[:16]}..., the join token expects {token['ca'][:16]}... "
            "(the token was minted against another cluster)"
        )
    body = json.dumps({"secret": token["secret"], "role": role, "node": os.uname().nodename}).encode()
    req = urllib.request.Request(token["url"] + "/join", data=body, method="POST")
    try:
        urllib.request.urlopen(req, timeout=5).close()
    except urllib.error.HTTPError as exc:
        fail(f"join refused by {token['url']}: {exc.read().decode().strip()}")
    except (urllib.error.URLError, OSError) as exc:
        fail(f"failed to connect to the join API at {token['url']}: {exc}")
    return ca


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


@contextlib.contextmanager
def state_lock(ddir: Path) -> Iterator[None]:
    """Serialise read-modify-write of ``<data-dir>/fake/*.json`` across k0s processes and threads.

    Real k0s keeps join tokens as Secrets in the cluster's API (one atomic create each), so
    concurrent ``k0s token create`` calls (spurd mints one per joining node, in parallel) never lose
    one another's token; the double's file needs this lock to behave the same."""
    (ddir / "fake").mkdir(parents=True, exist_ok=True)
    with open(ddir / "fake/.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class JoinApi(http.server.BaseHTTPRequestHandler):
    ddir: Path

    def log_message(self, *args: object) -> None:
        return

    def _answer(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/ca":
            self._answer(200, (self.ddir / "pki/ca.fingerprint").read_text())
        else:
            self._answer(404, "not found")

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/join":
            self._answer(404, "not found")
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            req = json.loads(self.rfile.read(length))
        except ValueError:
            self._answer(400, "bad request")
            return
        tokens_file = self.ddir / "fake/tokens.json"
        with state_lock(self.ddir):
            tokens = json.loads(tokens_file.read_text()) if tokens_file.exists() else []
            if not any(t["secret"] == req.get("secret") and t["role"] == req.get("role") for t in tokens):
                self._answer(403, "invalid or unknown join token")
                return
            joined_file = self.ddir / "fake/joined.json"
            joined = json.loads(joined_file.read_text()) if joined_file.exists() else []
            joined.append({"node": req.get("node"), "role": req.get("role")})
            write_json(joined_file, joined)
        self._answer(200, "ok")


def serve_join_api(ddir: Path, config: dict) -> str:
    api = config.get("spec", {}).get("api", {})
    host = api.get("address") or os.environ.get("FAKE_K0S_ADDRESS") or "127.0.0.1"
    port = int(os.environ.get("FAKE_K0S_JOIN_PORT", api.get("k0sApiPort", 9443)))
    handler = type("Handler", (JoinApi,), {"ddir": ddir})
    # SO_REUSEADDR, as Go's listeners (k0s's) set it: a controller restarted on its fixed port must not
    # find it held by the TIME_WAIT connections of the joins its previous run answered.
    server_class = type("JoinServer", (socketserver.ThreadingTCPServer,), {"allow_reuse_address": True})
    try:
        server = server_class((host, port), handler)
    except OSError as exc:
        fail(f"failed to listen on {host}:{port} for the k0s join API: {exc.strerror}")
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return f"http://{bound_host}:{bound_port}"


def run_until_stopped(ddir: Path, status: dict) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    write_json(ddir / "run/status.json", {**status, "pid": os.getpid(), "started": time.time()})
    print(f"k0s {status['role']} started (pid {os.getpid()})", flush=True)
    while not stop.wait(0.2):
        pass
    try:
        (ddir / "run/status.json").unlink()
    except FileNotFoundError:
        pass
    print(f"k0s {status['role']} stopped", flush=True)
    return 0


def cmd_controller(opts: dict[str, str | bool], argv: list[str]) -> int:
    ddir = data_dir(opts)
    if running_status(ddir):
        fail("k0s is already running on this data dir")
    config_path = opts.get("--config")
    config = load_config(config_path if isinstance(config_path, str) else None)
    (ddir / "pki").mkdir(parents=True, exist_ok=True)
    token_file = opts.get("--token-file")
    if isinstance(token_file, str):
        ca = join(decode_token(token_file), "controller")
        (ddir / "pki/ca.fingerprint").write_text(ca)
    elif not (ddir / "pki/ca.fingerprint").exists():
        (ddir / "pki/ca.fingerprint").write_text(secrets.token_hex(32))
    url = serve_join_api(ddir, config)
    single = bool(opts.get("--single"))
    write_json(ddir / "fake/controller.json", {"argv": argv, "config": config, "join_url": url})
    status = {"role": "controller", "single": single, "workloads": single, "join_url": url}
    return run_until_stopped(ddir, status)


def cmd_worker(opts: dict[str, str | bool], argv: list[str]) -> int:
    ddir = data_dir(opts)
    token_file = opts.get("--token-file")
    if not isinstance(token_file, str):
        fail("worker needs --token-file (or a join token argument)")
    if running_status(ddir):
        fail("k0s is already running on this data dir")
    ca = join(decode_token(token_file), "worker")
    (ddir / "pki").mkdir(parents=True, exist_ok=True)
    (ddir / "pki/ca.fingerprint").write_text(ca)
    write_json(ddir / "fake/worker.json", {"argv": argv})
    return run_until_stopped(ddir, {"role": "worker", "single": False, "workloads": True})


def cmd_token(words: list[str], opts: dict[str, str | bool]) -> int:
    if words[1:2] != ["create"]:
        fail("unknown token command (the fake k0s knows: token create --role=worker|controller)")
    role = opts.get("--role", "worker")
    if role not in ("worker", "controller"):
        fail(f'unsupported role "{role}"; supported roles are "controller" and "worker"')
    ddir = data_dir(opts)
    status = running_status(ddir)
    if status is None or status["role"] != "controller":
        fail("failed to create join token: no running controller on this node")
    secret = secrets.token_hex(16)
    tokens_file = ddir / "fake/tokens.json"
    with state_lock(ddir):
        tokens = json.loads(tokens_file.read_text()) if tokens_file.exists() else []
        tokens.append({"role": role, "secret": secret})
        write_json(tokens_file, tokens)
    ca = (ddir / "pki/ca.fingerprint").read_text()
    token = {"role": role, "url": status["join_url"], "ca": ca, "secret": secret}
    print(base64.b64encode(json.dumps(token).encode()).decode())
    return 0


def cmd_kubeconfig(words: list[str], opts: dict[str, str | bool]) -> int:
    if words[1:2] != ["admin"]:
        fail("unknown kubeconfig command (the fake k0s knows: kubeconfig admin)")
    ddir = data_dir(opts)
    ca_file = ddir / "pki/ca.fingerprint"
    if not ca_file.exists() or not (ddir / "fake/controller.json").exists():
        fail("failed to read admin config: this node is not an initialised k0s controller")
    ca = ca_file.read_text()
    api_ca_file = os.environ.get("FAKE_K0S_API_CA_FILE")
    api_ca = Path(api_ca_file).read_bytes() if api_ca_file else ca.encode()
    token_file = os.environ.get("FAKE_K0S_API_TOKEN_FILE")
    token = Path(token_file).read_text().strip() if token_file else f"admin-{ca[:12]}"
    print(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n"
        f"    server: {os.environ.get('FAKE_K0S_API_URL', 'https://localhost:6443')}\n"
        f"    certificate-authority-data: {base64.b64encode(api_ca).decode()}\n"
        "contexts:\n- name: Default\n  context:\n    cluster: local\n    user: user\n"
        "current-context: Default\nusers:\n- name: user\n  user:\n"
        f"    token: {token}\n"
    )
    return 0


def cmd_status(opts: dict[str, str | bool]) -> int:
    status = running_status(data_dir(opts))
    if status is None:
        fail('can\'t get "status" via "/run/k0s/status.sock": k0s is not running', 1)
    print(f"Version: {os.environ.get('FAKE_K0S_VERSION', VERSION)}")
    print(f"Process ID: {status['pid']}")
    print(f"Role: {status['role']}")
    print(f"Workloads: {str(status['workloads']).lower()}")
    print(f"SingleNode: {str(status['single']).lower()}")
    return 0


def cmd_reset(opts: dict[str, str | bool]) -> int:
    import shutil

    ddir = data_dir(opts)
    if running_status(ddir):
        fail("k0s seems to be running! please stop k0s before reset.")
    if ddir.exists():
        shutil.rmtree(ddir)
    print("k0s reset: data dir removed; reboot the node to clean up leftover network state", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    words, opts = parse(argv)
    if not words:
        print("Usage: k0s [command]\n  controller worker token kubeconfig status reset version", file=sys.stderr)
        return 1
    command = words[0]
    if command == "version":
        print(os.environ.get("FAKE_K0S_VERSION", VERSION))
        return 0
    root()
    if command == "controller":
        return cmd_controller(opts, argv)
    if command == "worker":
        if len(words) > 1 and "--token-file" not in opts:
            fail("the fake k0s takes the join token with --token-file only")
        return cmd_worker(opts, argv)
    if command == "token":
        return cmd_token(words, opts)
    if command == "kubeconfig":
        return cmd_kubeconfig(words, opts)
    if command == "status":
        return cmd_status(opts)
    if command == "reset":
        return cmd_reset(opts)
    fail(f'unknown command "{command}" for "k0s"')
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
