"""``spur web``: print the dashboard's URL for the current user, as a one-time sign-in link.

``spur web [--url URL] [--lifespan SECONDS] [--no-browser]`` mints a token for the caller (as ``spur
token`` does: the caller's own credential proves who asks) and prints
``<base>/ui/login/link?token=<JWT>``: the link signs the browser in once; the session then lasts the
token's lifespan. The base URL is ``--url``, else ``$SPUR_REST_URL``, else the first controller's host on
the port of ``controller.rest_addr`` in the config file (6820 without one; https with ``[tls]``). On a cluster without a JWT key no token can be minted; the plain
``<base>/ui/`` is printed (its form asks for a user name). The link is opened in a browser only when
one can be shown (``$DISPLAY``, ``$WAYLAND_DISPLAY`` or ``$BROWSER`` set) and ``--no-browser`` is not given.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import quote

from spur.cli.slurmargs import SlurmArgParser

USAGE = "Usage: spur web [--url URL] [--lifespan SECONDS] [--no-browser]"


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser(prog="spur web", usage=USAGE, description="Print (and open) the dashboard URL.")
    p.add_argument("--url", default="", help="REST base URL (default: $SPUR_REST_URL, else the controller's host, port 6820)")
    p.add_argument("--lifespan", type=int, default=0, help="Session lifetime in seconds (default: the cluster's token lifetime)")
    p.add_argument("--no-browser", action="store_true", help="Only print the link; do not open a browser")
    return p


def can_open_browser(environ: dict[str, str] | os._Environ[str]) -> bool:
    """True when a browser can be shown here (a display or an explicit $BROWSER)."""
    return any(environ.get(k) for k in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"))


def link_for(base: str, token: str | None) -> str:
    """The sign-in link for ``token`` (the plain dashboard URL without one)."""
    base = base.rstrip("/")
    return f"{base}/ui/login/link?token={quote(token, safe='')}" if token else f"{base}/ui/"


def main(argv: list[str]) -> int:
    from spur.cli.client import CliError, _config, client_tls, controller_targets
    from spur.cli.sattach import rest_base_url
    from spur.cli.token import mint_token

    args = build_parser().parse_args(argv)
    if args.lifespan < 0:
        print("spur web: error: --lifespan must be a positive number of seconds", file=sys.stderr)
        return 1
    tls = client_tls() is not None
    base = rest_base_url(args.url, dict(os.environ), controller_targets(), tls)
    cfg = _config()
    if not args.url and not os.environ.get("SPUR_REST_URL") and cfg is not None:
        port = cfg.controller.rest_addr.rsplit(":", 1)[-1]
        if port.isdigit():  # the configured REST port, on the controller's host
            base = base.rsplit(":", 1)[0] + ":" + port
    token: str | None = None
    try:
        line = mint_token(lifespan=args.lifespan)
        token = line.split("=", 1)[1]
    except CliError as exc:
        if "no auth key" not in str(exc) and "permissive or required" not in str(exc):
            print(f"spur web: error: {exc}", file=sys.stderr)
            return 1
        print("spur web: this cluster has no JWT key: sign in with your user name", file=sys.stderr)
    url = link_for(base, token)
    print(url)
    if not args.no_browser and can_open_browser(os.environ):
        import webbrowser

        webbrowser.open(url)
    return 0
