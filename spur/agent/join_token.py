"""spurd's admission secrets: the join token it presents and the node credential it keeps.

The join token comes from ``--join-token``, ``--join-token-file``, ``[agent] join_token`` or
``[agent] join_token_file`` (first found wins; a file is read once at start and must not be
readable by group or other). The node credential the controller hands out at an admitted
registration is kept per cluster (:class:`spur.agent.clusters.ClusterDirs`, mode 0600) and sent
with every call to the controller as ``x-spur-node-credential``. Neither is ever logged.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from spur.agent.clusters import ClusterDirs
from spur.core.admission import CREDENTIAL_METADATA_KEY, TokenFormatError, parse_token

__all__ = ["CredentialKeeper", "JoinTokenError", "read_secret_file", "resolve_join_token"]

log = logging.getLogger("spur.agent.admission")


class JoinTokenError(ValueError):
    """The configured join token cannot be used; the message names the source, never the secret."""


def read_secret_file(path: Path, what: str) -> str:
    """The stripped contents of a secret file; refuses one readable by group or other."""
    try:
        st = os.stat(path)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise JoinTokenError(
                f"{what} {path} is accessible by group or other (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"run: chmod 600 {path}"
            )
        return path.read_text().strip()
    except OSError as e:
        raise JoinTokenError(f"cannot read {what} {path}: {e.strerror or e}") from None


def resolve_join_token(
    *, flag: str | None, flag_file: Path | None, conf_token: str | None, conf_file: Path | None
) -> str:
    """The join token to present ("" for none), from the first source set (see the module docstring)."""
    if flag is not None:
        token, source = flag, "--join-token"
    elif flag_file is not None:
        token, source = read_secret_file(flag_file, "--join-token-file"), f"--join-token-file {flag_file}"
    elif conf_token is not None:
        token, source = conf_token, "agent.join_token"
    elif conf_file is not None:
        token, source = (
            read_secret_file(conf_file, "agent.join_token_file"),
            f"agent.join_token_file {conf_file}",
        )
    else:
        return ""
    try:
        parse_token(token)
    except TokenFormatError as e:
        raise JoinTokenError(f"{source}: {e}") from None
    return token.strip().lower()


class CredentialKeeper:
    """Keeps the node credential of the current cluster in ``metadata`` (the controller link's headers)."""

    def __init__(self, state_dir: Path, metadata: dict[str, str]) -> None:
        self.dirs = ClusterDirs(state_dir)
        self.metadata = metadata

    def use(self, cluster_id: str) -> None:
        """Send the credential held for ``cluster_id`` (none: send nothing)."""
        credential = self.dirs.read_credential(cluster_id)
        if credential:
            self.metadata[CREDENTIAL_METADATA_KEY] = credential
        else:
            self.metadata.pop(CREDENTIAL_METADATA_KEY, None)

    def registered(self, cluster_id: str, credential: str) -> None:
        """After a registration: keep a newly issued credential (0600), else the one held for the cluster."""
        if credential:
            if cluster_id:
                try:
                    self.dirs.write_credential(cluster_id, credential)
                except (OSError, ValueError) as e:
                    log.error("cannot keep the node credential of cluster %s: %s", cluster_id, e)
            self.metadata[CREDENTIAL_METADATA_KEY] = credential
            log.info("admitted to cluster %s: node credential kept", cluster_id or "(unnamed)")
        elif cluster_id:
            held = self.dirs.read_credential(cluster_id)
            if held:
                self.metadata[CREDENTIAL_METADATA_KEY] = held
