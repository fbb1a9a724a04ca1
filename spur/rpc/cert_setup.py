"""Setting up ``[tls]`` on one host, as ``spur cert init`` and ``spurctld --init-tls`` both do.

:func:`init_tls` makes the cluster CA (or reuses the one in the directory) and this host's certificate
with :mod:`spur.rpc.certs`, prints what was written and the ``[tls]`` lines to paste into spur.conf,
and returns the exit code. It sits in the RPC layer beside the certificates it makes, so the daemon and
the command share it without spurctld importing the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spur.rpc.certs import CA_DAYS, NODE_DAYS, CertError, Issued, ensure_ca, issue, local_names, tls_lines

__all__ = ["init_tls", "say_issued"]


def say_issued(issued: Issued, what: str) -> None:
    """Print that ``issued`` was written (or kept) and where its key is."""
    verb = "wrote" if issued.created else "kept existing"
    print(f"{verb} {what}: {issued.cert} (serial {issued.serial:#x}, expires {issued.not_after:%Y-%m-%d})")
    print(f"{' ' * len(verb)} key: {issued.key} (mode 0600)")


def init_tls(
    directory: Path, *, name: str | None = None, cluster: str = "spur", days: int | None = None
) -> int:
    """``spur cert init`` (and ``spurctld --init-tls``): CA + this host's certificate; prints what was
    written and the [tls] lines. Returns the exit code."""
    host, dns, ips = local_names()
    name = name or host
    try:
        ca = ensure_ca(directory, cluster_name=cluster, days=CA_DAYS)
        say_issued(ca, "cluster CA")
        node_cert = directory / f"{name}.crt"
        if node_cert.exists():
            from cryptography import x509

            cert = x509.load_pem_x509_certificate(node_cert.read_bytes())
            node = Issued(
                node_cert, directory / f"{name}.key", False, cert.serial_number, cert.not_valid_after_utc
            )
        else:
            node = issue(directory, name, dns=dns, ips=ips, days=NODE_DAYS if days is None else days)
        say_issued(node, f"certificate of {name}")
    except CertError as exc:
        print(f"spur cert init: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"spur cert init: error: {directory}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"\nAdd to spur.conf on this host ({name}):\n")
    print(tls_lines(ca.cert, node.cert, node.key))
    print(
        f"\nOther hosts: spur cert issue HOST --dns HOST --ip ADDR --dir {directory}, then copy ca.crt and"
        ' HOST.crt/HOST.key there.\nUsers\' machines need only ca.crt and: [tls] mode = "required",'
        f' ca_file = "{ca.cert}"'
    )
    return 0
