"""`rate_bucket`: the per-token rate limit's buckets in PostgreSQL, so every worker of `serve --workers N` and
every replica takes from one bucket per token (it was an in-process dict: N workers gave a token N times its rate).

UNLOGGED: the buckets are soft state written on every tool call; no WAL and no commit flush for them, and a crash
of the server only refills every bucket.

Revision ID: 7b3c2e9d4f10
Revises: 5d0e7a1c9b42
Create Date: 2026-12-01 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "7b3c2e9d4f10"
down_revision: str | None = "5d0e7a1c9b42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_bucket",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("stamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_bucket")),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("rate_bucket")
