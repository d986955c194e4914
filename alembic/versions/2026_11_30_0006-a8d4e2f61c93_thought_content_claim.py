"""Content claims: a unique (project, md5(content)) key that create paths insert before their thoughts.

Two calls storing the same new content at the same moment both found no live duplicate and both
inserted it. Each create now claims its new contents first; a second claim of one content waits for
the first call to commit, then sees its thought and merges into it (docs/mcp-tools.md, memory_store action=create). Nothing else writes
the table, so no backfill: an existing live thought is still found by its content, as before.

Revision ID: a8d4e2f61c93
Revises: 3f7a9c1b5d20
Create Date: 2026-11-30 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "a8d4e2f61c93"
down_revision: str | None = "3f7a9c1b5d20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "thought_content_claim",
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("content_md5", sa.Text(), nullable=False),
        sa.Column("thought_id", sa.UUID(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["project.id"],
            name=op.f("fk_thought_content_claim_project_id_project"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("project_id", "content_md5", name=op.f("pk_thought_content_claim")),
    )


def downgrade() -> None:
    op.drop_table("thought_content_claim")
