"""API tokens expire: `api_token.expires_at` (NULL = never).

`synaptomind token create --expires …` sets it (by default `auth.token_lifetime_days` from now); the bearer
check refuses a token past it with the same 401 as an unknown or revoked one. The tokens that exist when
this runs keep NULL, so an upgrade locks nobody out; rotate them (`synaptomind token rotate ID`) to give
them a lifetime.

No index: the column is read only from the row the token hash's unique index already found.

Revision ID: d4f8a2c6e913
Revises: b7c3e5a91d2f
Create Date: 2026-12-01 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "d4f8a2c6e913"
down_revision: str | None = "b7c3e5a91d2f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable without a default: a catalog-only change, no table rewrite and no long lock.
    op.add_column("api_token", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_token", "expires_at")
