"""Leave room on every `thought` page so importance updates stay HOT.

The daily decay, link bonuses and primer promotion rewrite `importance`, which no index covers. On a
full page each rewrite is a new row version in every index of the table, HNSW included; with free
space on the page PostgreSQL updates in place (HOT) and touches no index. Measured at 100 000
thoughts (docs/BENCHMARKS.md): the decay went from 37.8 s to 3-5 s; the table grows by about a third.

Pages written from now on keep 30 % free. Existing rows move into such pages when the table is
rewritten (`VACUUM FULL thought`, or pg_repack without a long lock), which a migration should not do
to a live table behind the operator's back (docs/DEPLOY.md).

Revision ID: e41a6c2d9b57
Revises: 9b3d2c7e1f08
Create Date: 2026-11-30 06:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "e41a6c2d9b57"
down_revision: str | None = "9b3d2c7e1f08"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE thought SET (fillfactor = 70)")


def downgrade() -> None:
    op.execute("ALTER TABLE thought RESET (fillfactor)")
