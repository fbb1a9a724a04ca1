"""The controller's accounting-storage runtime: the store (when configured) and its visible status.

One per spurctld. :class:`AccountingStatus` is what sdiag and ``scontrol show config`` report: whether a
database is configured, whether it answers (and why not), the schema version and the flush figures.
State changes are logged once each (never every retry), and no message carries the URL's password.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from spur.accounting.dburl import DatabaseUrlError, redact_url
from spur.accounting.pgstore import PgStore

__all__ = ["AccountingRuntime", "AccountingStatus"]

log = logging.getLogger("spur.accounting")

NOT_CONFIGURED = "not configured"
CONNECTING = "connecting"
CONNECTED = "connected"
UNAVAILABLE = "unavailable"


@dataclass
class AccountingStatus:
    """Figures of this controller's accounting storage (flush figures count while it leads)."""

    configured: bool = False
    display_url: str = ""
    state: str = NOT_CONFIGURED
    error: str = ""
    schema_version: int = 0
    last_flush_time: float = 0.0
    last_flush_records: int = 0
    last_flush_rate: float = 0.0
    records_flushed: int = 0
    flush_errors: int = 0

    def set_state(self, state: str, error: str = "") -> None:
        """Record the database state; log only when it (or the error text) changes."""
        if (state, error) == (self.state, self.error):
            return
        self.state, self.error = state, error
        if state == UNAVAILABLE:
            log.warning("accounting database %s unavailable: %s", self.display_url, error)
        else:
            log.info("accounting database %s: %s", self.display_url, state)


class AccountingRuntime:
    """Owns the :class:`PgStore` for ``database_url`` (None = embedded history only)."""

    def __init__(self, database_url: str | None) -> None:
        self.status = AccountingStatus()
        self.store: PgStore | None = None
        if not database_url:
            return
        self.status.configured = True
        self.status.display_url = redact_url(database_url)
        try:
            self.store = PgStore(database_url)
        except DatabaseUrlError as exc:
            self.status.set_state(UNAVAILABLE, str(exc))
            return
        self.status.state = CONNECTING

    @property
    def configured(self) -> bool:
        """True when ``[accounting] database_url`` is set (even if it does not parse)."""
        return self.status.configured

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()
