"""Installing the k0s binary from the official release, verified before it is installed.

The release layout is GitHub's: under the base URL (``[cluster] k0s_release_url``, default
``https://github.com/k0sproject/k0s/releases``) the binary of tag T for architecture A is
``download/T/k0s-T-A`` and the release's checksums are ``download/T/sha256sums.txt``
(``<hex>  <file name>`` lines); ``latest`` redirects to ``tag/<newest tag>``.

Order of operations: fetch the checksums, download the binary into a temporary file next to the
target, hash it, and only if the SHA-256 matches the published one set mode 0755 and rename it over
the target (atomic on one filesystem). A mismatch, a missing checksum or a failed download deletes
the temporary file and leaves the target untouched.

:func:`arch_of`, :func:`binary_name`, :func:`expected_sha256` and :func:`tag_from_latest` are pure.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

CHUNK = 1 << 20
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
          "armv8l": "arm"}


class InstallError(Exception):
    """A user-facing install failure (one line); nothing was installed."""


@dataclass(frozen=True)
class Installed:
    """The result of an install: where, which tag, the verified SHA-256, and whether it was already
    there (``skipped``: the target existed and ``force`` was not given)."""

    path: Path
    tag: str
    sha256: str
    skipped: bool = False


def arch_of(machine: str) -> str:
    """k0s's architecture name for ``platform.machine()``; InstallError for one k0s does not ship."""
    try:
        return ARCHES[machine.lower()]
    except KeyError:
        raise InstallError(f"k0s publishes no binary for architecture {machine!r}") from None


def binary_name(tag: str, arch: str) -> str:
    return f"k0s-{tag}-{arch}"


def expected_sha256(sums: str, name: str) -> str:
    """The SHA-256 the checksum file ``sums`` publishes for ``name`` (``sha256sum`` format, with an
    optional ``*`` binary marker). InstallError when it lists no (valid) entry for ``name``."""
    for line in sums.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == name:
            digest = parts[0].lower()
            if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
                return digest
            raise InstallError(f"the release's sha256sums.txt has a malformed checksum for {name}")
    raise InstallError(f"the release's sha256sums.txt lists no checksum for {name}; nothing was installed")


def tag_from_latest(final_url: str) -> str:
    """The tag at the end of the URL ``…/releases/latest`` redirected to (``…/tag/<tag>``)."""
    path = urllib.parse.urlsplit(final_url).path.rstrip("/")
    head, _, tag = path.rpartition("/")
    if not head.endswith("/tag") or not tag:
        raise InstallError(f"cannot tell the latest k0s release from {final_url}")
    return urllib.parse.unquote(tag)


class _Download(Protocol):
    """An open ``urlopen`` answer as this module reads it (an HTTP response, or a file URL's)."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def read(self, amt: int = ..., /) -> bytes: ...

    def geturl(self) -> str: ...


def _get(url: str, timeout: float) -> _Download:
    try:
        return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 (https or a configured base)
    except urllib.error.HTTPError as exc:
        raise InstallError(f"download failed: {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InstallError(f"download failed: {url}: {reason}") from None


def resolve_tag(version: str, base_url: str, timeout: float = 30) -> str:
    """``version`` itself, or for ``latest`` the newest release's tag."""
    if version != "latest":
        return version
    with _get(f"{base_url.rstrip('/')}/latest", timeout) as resp:
        return tag_from_latest(resp.geturl())


def install_k0s(
    *,
    version: str,
    path: Path,
    base_url: str,
    force: bool = False,
    machine: str | None = None,
    timeout: float = 60,
) -> Installed:
    """Download, verify and install k0s ``version`` (a tag or ``latest``) at ``path``.

    Without ``force`` an existing file at ``path`` is kept (``skipped``). Raises InstallError (the
    target unchanged) on a download failure, a checksum mismatch or an unwritable directory.
    """
    if not version:
        raise InstallError("no k0s version given (set [cluster] k0s_version or pass --version)")
    arch = arch_of(machine or platform.machine())
    tag = resolve_tag(version, base_url, timeout)
    if "/" in tag or tag in ("", ".", ".."):
        raise InstallError(f"invalid k0s release tag {tag!r}")
    if path.exists() and not force:
        return Installed(path=path, tag=tag, sha256="", skipped=True)
    base = f"{base_url.rstrip('/')}/download/{urllib.parse.quote(tag, safe='')}"
    name = binary_name(tag, arch)
    with _get(f"{base}/sha256sums.txt", timeout) as resp:
        want = expected_sha256(resp.read().decode("utf-8", "replace"), name)
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise InstallError(
            f"cannot write {directory}: {exc.strerror} (run as root, or choose another --path)"
        ) from None
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, _get(f"{base}/{urllib.parse.quote(name)}", timeout) as resp:
            while chunk := resp.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != want:
            raise InstallError(
                f"SHA-256 mismatch for {name}: the release publishes {want}, the download is {got}; "
                f"nothing was installed at {path}"
            )
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return Installed(path=path, tag=tag, sha256=want)
