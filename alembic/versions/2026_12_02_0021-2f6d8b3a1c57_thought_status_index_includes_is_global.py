"""`ix_thought_project_status_created` carries `is_global` (INCLUDE), so a count under the visibility rule is
index-only; and `ix_thought_project_protected_created`, the protected thoughts of a project newest first.

A token user's every read of `thought` is filtered by `project_id IN (their projects) OR is_global`
(app.db.visibility). `is_global` was in no index, so each count of a scope — the console's operations page counts
every project by status, the tools' `memory_recall list` and `memory_reflect timeline` totals count their scope —
read the heap of every row it counted: at 100 k thoughts the operations page's grouped count was a sequential scan
of the whole table (~0.4 s; docs/BENCHMARKS.md "Twelfth round"), an index-only scan with this column. The keys,
and so every plan that used the index, are unchanged. A plain CREATE INDEX blocks writes to `thought` while it
builds (under a second per 100 k thoughts).

The console's browse by standing `protected` read every row of the project to find its few protected ones (the
flag is in no index): at 100 k thoughts a page of the 50 k-thought project walked 50 000 heap rows (~0.25 s); the
partial index holds only the protected rows, in the page's order (< 1 ms).

Revision ID: 2f6d8b3a1c57
Revises: 7b3c2e9d4f10
Create Date: 2026-12-02 02:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2f6d8b3a1c57"
down_revision: str | None = "7b3c2e9d4f10"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_thought_project_status_created"
KEYS = ["project_id", "status", "created_at"]


PROTECTED = "ix_thought_project_protected_created"


def upgrade() -> None:
    op.drop_index(NAME, table_name="thought")
    op.create_index(NAME, "thought", KEYS, postgresql_include=["is_global"])
    op.create_index(
        PROTECTED, "thought", ["project_id", "created_at", "id"], postgresql_where=sa.text("is_protected")
    )


def downgrade() -> None:
    op.drop_index(PROTECTED, table_name="thought")
    op.drop_index(NAME, table_name="thought")
    op.create_index(NAME, "thought", KEYS)
