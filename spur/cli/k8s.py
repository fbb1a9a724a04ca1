"""``spur k8s``: Spur-managed Kubernetes (k0s).

``spur k8s install-k0s [--version TAG|latest] [--path P] [--force]`` installs the k0s binary on this
node: it downloads the release for this machine's architecture from ``[cluster] k0s_release_url``,
checks its SHA-256 against the release's published ``sha256sums.txt`` and only then installs it
(temporary file + rename, mode 0755). A mismatch installs nothing. Defaults: ``[cluster]
k0s_version`` and ``[cluster] k0s_binary``. Run it as root for the default path.

With ``[cluster] enabled = false`` (the default) every ``spur k8s`` command says the feature is off
and how to turn it on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "spur k8s"
USAGE = """Usage: spur k8s install-k0s [--version TAG|latest] [--path PATH] [--force]"""
SUBCOMMANDS = {
    "install-k0s": "Download, SHA-256-verify and install the k0s binary on this node (run as root).",
}
OPTION_HELP = {
    "version": "k0s release tag, or 'latest' (default: [cluster] k0s_version)",
    "path": "where to install the binary (default: [cluster] k0s_binary)",
    "force": "replace a binary already at the path",
}
OFF_MESSAGE = (
    "Spur-managed Kubernetes is off ([cluster] enabled = false). To turn it on, set enabled = true "
    "in the [cluster] section of spur.conf on the controller and on every node, then restart "
    "spurctld and spurd."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{PROG} install-k0s", add_help=True)
    parser.add_argument("--version", metavar="TAG", help=OPTION_HELP["version"])
    parser.add_argument("--path", metavar="PATH", help=OPTION_HELP["path"])
    parser.add_argument("--force", action="store_true", help=OPTION_HELP["force"])
    return parser


def _cluster_config():  # -> ClusterConfig
    from spur.cli.client import _config
    from spur.config.model import ClusterConfig

    cfg = _config()
    return cfg.cluster if cfg is not None else ClusterConfig()


def install_k0s_main(args: list[str]) -> int:
    from spur.k8s.cluster.install import InstallError, install_k0s

    parser = build_parser()
    try:
        opts = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    cluster = _cluster_config()
    if not cluster.enabled:
        print(f"{PROG}: {OFF_MESSAGE}", file=sys.stderr)
        return 1
    path = Path(opts.path) if opts.path else cluster.k0s_binary
    version = opts.version or cluster.k0s_version
    try:
        result = install_k0s(version=version, path=path, base_url=cluster.k0s_release_url, force=opts.force)
    except InstallError as exc:
        print(f"{PROG} install-k0s: error: {exc}", file=sys.stderr)
        return 1
    if result.skipped:
        print(f"k0s is already installed at {path}; nothing done (use --force to replace it with {result.tag})")
    else:
        print(f"installed k0s {result.tag} at {path} (sha256 {result.sha256} verified)")
    return 0


def main(args: list[str]) -> int:
    from spur.cli.client import CliError

    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        for name, text in SUBCOMMANDS.items():
            print(f"  {name:<12} {text}")
        return 0 if args else 2
    verb, rest = args[0], args[1:]
    try:
        if verb == "install-k0s":
            return install_k0s_main(rest)
    except CliError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(f"{PROG}: error: unknown command {verb!r} (commands: {', '.join(SUBCOMMANDS)})", file=sys.stderr)
    return 2
