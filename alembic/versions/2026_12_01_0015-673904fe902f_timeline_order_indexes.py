"""Newest-first indexes on `thought`: (project_id, created_at, id) and (created_at, id).

The paged inventory (`memory_reflect timeline`, `memory_recall list`, the console's timeline) orders by
created_at DESC, id DESC. With a status filter `ix_thought_project_status_created` gives that order; without
one (status `all`, the timeline's default) PostgreSQL sorted the whole scope for every page: ~150 ms for a
50 k-thought project at 100 k thoughts, ~1 ms with these (docs/BENCHMARKS.md "Console pages at 100 k").
A plain CREATE INDEX blocks writes to `thought` while it builds (about 0.5 s per 100 k thoughts).

Revision ID: 673904fe902f
Revises: 4d942f70f239
Create Date: 2026-12-01 13:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "673904fe902f"
down_revision: str | None = "4d942f70f239"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_thought_project_created", "thought", ["project_id", "created_at", "id"])
    op.create_index("ix_thought_created", "thought", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_thought_created", table_name="thought")
    op.drop_index("ix_thought_project_created", table_name="thought")
