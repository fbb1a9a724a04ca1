"""A cluster CA and node certificates for ``[tls]``, made with ``cryptography`` (``spur cert``).

Contracts:

- Keys are ECDSA P-256, signatures SHA-256. The CA is valid 10 years (``CA_DAYS``), node certificates
  1 year (``NODE_DAYS``). A node certificate names its host in the subject CN and in its
  subjectAltName (DNS names and IP addresses), and is good for both TLS server and client auth (a
  daemon serves with it and presents it to other daemons).
- Files are written atomically; private keys are created with mode 0600, certificates 0644.
- :func:`ensure_ca` reuses a CA already in the directory (idempotent); :func:`issue` refuses to
  replace an existing certificate unless ``force`` (rotation), raising :class:`CertError`.
- Nothing here prints: the callers (spur.cli.cert, spur.rpc.cert_setup) say what was written.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA_DAYS", "NODE_DAYS", "CertError", "Issued", "ensure_ca", "issue", "local_names", "tls_lines"]

CA_DAYS = 3650
NODE_DAYS = 365
CA_CERT, CA_KEY = "ca.crt", "ca.key"


class CertError(Exception):
    """A certificate cannot be made (one line: what and why)."""


@dataclass(frozen=True)
class Issued:
    """What a call wrote (or found): paths, whether new, serial and expiry."""

    cert: Path
    key: Path
    created: bool
    serial: int
    not_after: dt.datetime


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """Signing only; a CA also signs certificates and CRLs."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise CertError(f"cannot use the CA in {directory}: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path}: not an ECDSA key")
    return cert, key


def ensure_ca(directory: Path, *, cluster_name: str = "spur", days: int = CA_DAYS) -> Issued:
    """The cluster CA in ``directory`` (``ca.crt``, ``ca.key``): made if absent, else reused."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if cert_path.exists() or key_path.exists():
        cert, _key = _load_ca(directory)
        return Issued(cert_path, key_path, False, cert.serial_number, cert.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster_name),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{cluster_name} cluster CA"),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Issued(cert_path, key_path, True, cert.serial_number, cert.not_valid_after_utc)


def issue(
    directory: Path,
    name: str,
    *,
    dns: list[str] | tuple[str, ...] = (),
    ips: list[str] | tuple[str, ...] = (),
    days: int = NODE_DAYS,
    force: bool = False,
) -> Issued:
    """A node certificate ``NAME.crt``/``NAME.key`` signed by the CA in ``directory``. Raises CertError
    for a bad name or address, a missing CA, or an existing certificate without ``force``."""
    if not name or "/" in name or name.startswith("."):
        raise CertError(f"{name!r} is not a usable certificate name")
    if name == "ca":
        raise CertError("'ca' is the CA's own file name; choose another name")
    addresses = []
    for ip in ips:
        try:
            addresses.append(ipaddress.ip_address(ip))
        except ValueError:
            raise CertError(f"--ip {ip!r} is not an IP address") from None
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    if (cert_path.exists() or key_path.exists()) and not force:
        raise CertError(f"{cert_path} already exists; pass --force to replace it (rotation)")
    if not (directory / CA_CERT).exists():
        raise CertError(f"no CA in {directory}: run 'spur cert init --dir {directory}' first")
    ca_cert, ca_key = _load_ca(directory)
    names = list(dict.fromkeys([name, *dns]))
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt += [x509.IPAddress(a) for a in dict.fromkeys(addresses)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Issued(cert_path, key_path, True, cert.serial_number, cert.not_valid_after_utc)


def local_names() -> tuple[str, list[str], list[str]]:
    """This host: (name, DNS names, IP addresses) for its certificate: the hostname, its FQDN and
    ``localhost``; the addresses the hostname resolves to, plus the loopback addresses."""
    host = socket.gethostname()
    dns = [host]
    fqdn = socket.getfqdn()
    if fqdn and fqdn != host:
        dns.append(fqdn)
    dns.append("localhost")
    ips = ["127.0.0.1", "::1"]
    try:
        for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
            addr = str(info[4][0]).split("%")[0]
            if addr not in ips:
                ips.append(addr)
    except OSError:
        pass
    return host, dns, ips


def tls_lines(ca: Path, cert: Path | None, key: Path | None, *, mode: str = "required") -> str:
    """The ``[tls]`` section to paste into spur.conf."""
    lines = ["[tls]", f'mode = "{mode}"']
    if cert is not None and key is not None:
        lines += [f'cert_file = "{cert}"', f'key_file = "{key}"']
    lines.append(f'ca_file = "{ca}"')
    return "\n".join(lines)
