"""The database a process runs on: the configured one, or the embedded PostgreSQL in the data dir.

Apart from the composition root (app.main): the one-off commands open it without importing the MCP SDK, the
tools or the HTTP side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.db.embedded import EmbeddedPostgres, tuned_server_settings

if TYPE_CHECKING:
    from app.config import Settings


@dataclass
class DatabaseHandle:
    url: str
    embedded: EmbeddedPostgres | None

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()


def open_database(settings: Settings, migrate: bool = True) -> DatabaseHandle:
    """The configured database, or the embedded one in the data dir; migrated to head."""
    embedded = None
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
    else:
        tuning = tuned_server_settings(settings.embedded.shared_buffers_mb)
        embedded = EmbeddedPostgres(settings.data_dir, server_settings=tuning)
        url = embedded.start()
    if migrate:
        from app.db import migrations

        migrations.upgrade(url)
    return DatabaseHandle(url, embedded)
