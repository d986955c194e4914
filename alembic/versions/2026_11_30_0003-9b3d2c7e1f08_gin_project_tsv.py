"""Full-text index keyed by project: GIN (project_id, tsv) with btree_gin.

The lexical leg filters by project. With GIN on `tsv` alone PostgreSQL intersected it with a btree
bitmap of the whole project (6 ms for a 50 000-thought project); the combined GIN answers both in one
scan (docs/BENCHMARKS.md). A multicolumn GIN also serves `tsv` conditions without a project, so it
replaces the old index (one index less to maintain per insert).

Revision ID: 9b3d2c7e1f08
Revises: 5c1f0e9a7d42
Create Date: 2026-11-30 05:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "9b3d2c7e1f08"
down_revision: str | None = "5c1f0e9a7d42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.create_index("ix_thought_project_tsv", "thought", ["project_id", "tsv"], unique=False, postgresql_using="gin")
    op.drop_index("ix_thought_tsv", table_name="thought", postgresql_using="gin")


def downgrade() -> None:
    op.create_index("ix_thought_tsv", "thought", ["tsv"], unique=False, postgresql_using="gin")
    op.drop_index("ix_thought_project_tsv", table_name="thought", postgresql_using="gin")
    op.execute("DROP EXTENSION IF EXISTS btree_gin")
