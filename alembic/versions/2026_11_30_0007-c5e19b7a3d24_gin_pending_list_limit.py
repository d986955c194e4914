"""Small GIN pending lists on `thought`: 256 kB instead of the server's 4 MB default.

With `fastupdate` (on by default) a GIN index queues new entries in a pending list, and every scan
of the index reads the whole list. Measured at 100 000 thoughts (docs/BENCHMARKS.md): 3 000 new
thoughts left 3 000 entries pending and made the lexical leg 0.7 ms slower at p50; the list grows
to 4 MB (~12 000 thoughts) before an insert or autovacuum flushes it. With 256 kB the same inserts
left ~700 pending and the leg kept its time; inserts flush a small list more often instead.

Revision ID: c5e19b7a3d24
Revises: a8d4e2f61c93
Create Date: 2026-11-30 13:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "c5e19b7a3d24"
down_revision: str | None = "a8d4e2f61c93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = ("ix_thought_project_tsv", "ix_thought_tags")


def upgrade() -> None:
    for index in _INDEXES:
        op.execute(f"ALTER INDEX {index} SET (gin_pending_list_limit = 256)")


def downgrade() -> None:
    for index in _INDEXES:
        op.execute(f"ALTER INDEX {index} RESET (gin_pending_list_limit)")
