"""Server-side console sessions: `console_session`, one row per sign-in, so a session can end before its cookie
expires (sign-out, an admin, a revoked token, a demotion, a new or cleared password; docs/SECURITY.md
"Sessions"). The cookie carries a random secret, the row its SHA-256. A new table only: no lock on
existing ones; the cookies issued before it name no row, so their sessions end at the upgrade (sign in again).

Revision ID: 5c1e8a9f3d20
Revises: 01bdcfeead22
Create Date: 2026-12-01 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "5c1e8a9f3d20"
down_revision: str | None = "01bdcfeead22"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_session",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("token_id", sa.UUID(), nullable=True),
        sa.Column("password_mark", sa.LargeBinary(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_reason", sa.String(length=32), nullable=True),
        sa.CheckConstraint("kind IN ('token', 'password', 'upstream')", name=op.f("ck_console_session_known_kind")),
        sa.CheckConstraint(
            "(kind = 'token') = (token_id IS NOT NULL) AND (kind = 'password') = (password_mark IS NOT NULL)",
            name=op.f("ck_console_session_credential_of_kind"),
        ),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_token.id"], name=op.f("fk_console_session_token_id_api_token"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["app_user.id"], name=op.f("fk_console_session_user_id_app_user"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_session")),
        sa.UniqueConstraint("secret_hash", name=op.f("uq_console_session_secret_hash")),
    )
    op.create_index("ix_console_session_expires_at", "console_session", ["expires_at"], unique=False)
    op.create_index(op.f("ix_console_session_token_id"), "console_session", ["token_id"], unique=False)
    op.create_index(op.f("ix_console_session_user_id"), "console_session", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_console_session_user_id"), table_name="console_session")
    op.drop_index(op.f("ix_console_session_token_id"), table_name="console_session")
    op.drop_index("ix_console_session_expires_at", table_name="console_session")
    op.drop_table("console_session")
