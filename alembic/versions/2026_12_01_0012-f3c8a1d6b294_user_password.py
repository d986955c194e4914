"""Admin-set passwords: `app_user.password_hash` (NULL = the user cannot sign in with a password).

`synaptomind user password --user NAME` sets or clears it; the OAuth sign-in page accepts a user name and
password beside an API token. The column holds `scrypt$n$r$p$salt$hash` (app.services.auth.tokens.hash_password):
the parameters travel with each hash, so they can be raised later without a migration.

Revision ID: f3c8a1d6b294
Revises: e7a1c3f5b820
Create Date: 2026-12-01 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "f3c8a1d6b294"
down_revision: str | None = "e7a1c3f5b820"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable without a default: a catalog-only change, no table rewrite and no long lock.
    op.add_column("app_user", sa.Column("password_hash", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("app_user", "password_hash")
