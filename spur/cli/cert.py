"""``spur cert init|issue``: a cluster CA and node certificates for ``[tls]`` (runs locally, no controller).

``init`` makes the cluster CA in DIR (``ca.crt``, ``ca.key``; an existing CA there is reused) and a
certificate for this host (its hostname, FQDN, ``localhost`` and addresses as subjectAltNames), then
prints the ``[tls]`` lines to paste into spur.conf. ``issue NAME`` signs a certificate for another host
(``--dns``, ``--ip``, repeatable); an existing one is replaced only with ``--force`` (rotation). Keys
are ECDSA P-256 written with mode 0600; the CA is valid 10 years, node certificates 1 year.

Copy ``ca.crt`` to every host and to every user's machine (the CLI verifies the controller with it),
``NAME.crt``/``NAME.key`` only to host NAME; keep ``ca.key`` offline once the nodes have certificates.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "spur cert"
USAGE = """Usage: spur cert init [--dir DIR] [--name NAME] [--cluster NAME] [--days N]
       spur cert issue NAME [--dns NAME]... [--ip ADDR]... [--dir DIR] [--days N] [--force]"""
SUBCOMMANDS = {
    "init": "Make the cluster CA (or reuse the one in DIR) and this host's certificate; print the [tls] lines.",
    "issue": "Sign a node certificate for NAME with the CA in DIR (--force replaces one: rotation).",
}
DEFAULT_DIR = "/etc/spur/tls"
OPTION_HELP = {
    "dir": f"directory of the CA and certificates (default {DEFAULT_DIR})",
    "name": "certificate name (init: default this host's name)",
    "cluster": "cluster name written into the CA's subject (init; default spur)",
    "dns": "a DNS name the certificate is valid for (repeatable)",
    "ip": "an IP address the certificate is valid for (repeatable)",
    "days": "validity in days (default: CA 3650, node 365)",
    "force": "replace an existing certificate of that name (issue)",
}


def build_parser() -> argparse.ArgumentParser:
    """The options of ``spur cert`` (documentation hook, see spur.cli.main)."""
    parser = argparse.ArgumentParser(prog=PROG, add_help=False)
    parser.add_argument("--dir", metavar="DIR", help=OPTION_HELP["dir"])
    parser.add_argument("--name", metavar="NAME", help=OPTION_HELP["name"])
    parser.add_argument("--cluster", metavar="NAME", help=OPTION_HELP["cluster"])
    parser.add_argument("--dns", metavar="NAME", action="append", help=OPTION_HELP["dns"])
    parser.add_argument("--ip", metavar="ADDR", action="append", help=OPTION_HELP["ip"])
    parser.add_argument("--days", metavar="N", type=int, help=OPTION_HELP["days"])
    parser.add_argument("--force", action="store_true", help=OPTION_HELP["force"])
    return parser


def cmd_init(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"{PROG} init")
    parser.add_argument("--dir", metavar="DIR", default=DEFAULT_DIR, help=OPTION_HELP["dir"])
    parser.add_argument("--name", metavar="NAME", help=OPTION_HELP["name"])
    parser.add_argument("--cluster", metavar="NAME", default="spur", help=OPTION_HELP["cluster"])
    parser.add_argument("--days", metavar="N", type=int, help=OPTION_HELP["days"])
    opts = parser.parse_args(args)
    if opts.days is not None and opts.days < 1:
        parser.error("--days must be at least 1")
    from spur.rpc.cert_setup import init_tls

    return init_tls(Path(opts.dir), name=opts.name, cluster=opts.cluster, days=opts.days)


def cmd_issue(args: list[str]) -> int:
    from spur.rpc.cert_setup import say_issued
    from spur.rpc.certs import CertError, issue, tls_lines

    parser = argparse.ArgumentParser(prog=f"{PROG} issue")
    parser.add_argument("name", metavar="NAME", help="the host (certificate) name; also its first DNS name")
    parser.add_argument("--dir", metavar="DIR", default=DEFAULT_DIR, help=OPTION_HELP["dir"])
    parser.add_argument("--dns", metavar="NAME", action="append", default=[], help=OPTION_HELP["dns"])
    parser.add_argument("--ip", metavar="ADDR", action="append", default=[], help=OPTION_HELP["ip"])
    parser.add_argument("--days", metavar="N", type=int, help=OPTION_HELP["days"])
    parser.add_argument("--force", action="store_true", help=OPTION_HELP["force"])
    opts = parser.parse_args(args)
    if opts.days is not None and opts.days < 1:
        parser.error("--days must be at least 1")
    directory = Path(opts.dir)
    kwargs = {} if opts.days is None else {"days": opts.days}
    try:
        issued = issue(directory, opts.name, dns=opts.dns, ips=opts.ip, force=opts.force, **kwargs)
    except CertError as exc:
        print(f"{PROG} issue: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG} issue: error: {directory}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    say_issued(issued, f"certificate of {opts.name}")
    print(f"\nCopy {issued.cert}, {issued.key} and {directory / 'ca.crt'} to {opts.name}; its spur.conf:\n")
    print(tls_lines(directory / "ca.crt", issued.cert, issued.key))
    print("\nRunning daemons pick up a replaced certificate on SIGHUP or scontrol reconfigure.")
    return 0


def main(argv: list[str]) -> int:
    from spur.cli.subcommands import run_subcommand

    return run_subcommand("cert", USAGE, {"init": cmd_init, "issue": cmd_issue}, argv)
