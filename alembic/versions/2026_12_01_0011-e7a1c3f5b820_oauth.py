"""MCP authorization (OAuth 2.1): registered clients, authorization requests and codes, access and refresh tokens.

Every secret is stored as its SHA-256 (client secrets, sign-in request handles, consent secrets, codes,
tokens), as `api_token` does: a database dump grants nothing. Every step of the flow is a row, so any
replica serves any step (app.services.auth.oauth). New tables only: no lock on existing ones.

Revision ID: e7a1c3f5b820
Revises: d4f8a2c6e913
Create Date: 2026-12-01 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "e7a1c3f5b820"
down_revision: str | None = "d4f8a2c6e913"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The type exists since 0001: reuse it, never create or drop it here.
USER_ROLE = postgresql.ENUM("admin", "writer", "reader", name="user_role", create_type=False)
NOW = sa.text("now()")
NO_SCOPES = sa.text("'{}'::text[]")


def upgrade() -> None:
    op.create_table(
        "oauth_client",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(length=32), nullable=True),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_client")),
    )
    op.create_table(
        "oauth_authorization",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("client_id", sa.String(length=64), nullable=False),
        sa.Column("request_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("consent_hash", sa.LargeBinary(length=32), nullable=True),
        sa.Column("code_hash", sa.LargeBinary(length=32), nullable=True),
        sa.Column("user_id", sa.UUID(), nullable=True),
        sa.Column("role", USER_ROLE, nullable=True),
        sa.Column("code_challenge", sa.String(length=128), nullable=False),
        sa.Column("redirect_uri", sa.Text(), nullable=False),
        sa.Column("redirect_uri_explicit", sa.Boolean(), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), server_default=NO_SCOPES, nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["oauth_client.id"],
            name=op.f("fk_oauth_authorization_client_id_oauth_client"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["app_user.id"], name=op.f("fk_oauth_authorization_user_id_app_user"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_authorization")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_oauth_authorization_code_hash")),
        sa.UniqueConstraint("request_hash", name=op.f("uq_oauth_authorization_request_hash")),
    )
    op.create_index(op.f("ix_oauth_authorization_client_id"), "oauth_authorization", ["client_id"])
    op.create_index("ix_oauth_authorization_expires_at", "oauth_authorization", ["expires_at"])
    op.create_table(
        "oauth_token",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("client_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("role", USER_ROLE, nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), server_default=NO_SCOPES, nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("family_id", sa.UUID(), nullable=False),
        sa.Column("parent_id", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('access', 'refresh')", name=op.f("ck_oauth_token_known_kind")),
        sa.ForeignKeyConstraint(
            ["client_id"], ["oauth_client.id"], name=op.f("fk_oauth_token_client_id_oauth_client"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["oauth_token.id"], name=op.f("fk_oauth_token_parent_id_oauth_token"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["app_user.id"], name=op.f("fk_oauth_token_user_id_app_user"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_oauth_token_token_hash")),
    )
    op.create_index(op.f("ix_oauth_token_family_id"), "oauth_token", ["family_id"])
    op.create_index(op.f("ix_oauth_token_user_id"), "oauth_token", ["user_id"])
    op.create_index("ix_oauth_token_expires_at", "oauth_token", ["expires_at"])


def downgrade() -> None:
    op.drop_table("oauth_token")
    op.drop_table("oauth_authorization")
    op.drop_table("oauth_client")
