"""The planner knows how small `project` and `project_member` are: ANALYZE them now, and let autovacuum analyze
them again after a handful of changes instead of 50.

Every read under the visibility rule (app.db.visibility) filters `thought` by `project_id IN (SELECT project_id
FROM project_member …) OR is_global`, and every read of `edge` looks up both ends in `thought` that way. Both
tables hold a few dozen rows, under autovacuum's default analyze threshold (50 changed rows), so a database
migrated from empty never had them analyzed; for a never-analyzed table PostgreSQL assumes at least 10 pages, so
it charged every `thought` lookup by id a 10-page scan of `project_member` and chose a sequential scan of the whole
`thought` heap over 3 835 index lookups, once per read of `edge`. At 100 k thoughts the health checks that read
`edge` (orphan_edges, duplicate_edges, the degree checks and the one pass over `thought`) took 890 ms of one
backend's CPU before, 480 ms after the ANALYZE (EXPLAIN ANALYZE without parallel workers; docs/BENCHMARKS.md,
"Console pages at 100 k", "Check now"). The threshold keeps them analyzed after a restore, which brings no
statistics (a table's storage options are part of its definition, so a dump keeps them).

Revision ID: 8e4f1a6c2d93
Revises: 2f6d8b3a1c57
Create Date: 2026-12-02 07:35:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "8e4f1a6c2d93"
down_revision: str | None = "2f6d8b3a1c57"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("project", "project_member")
ANALYZE_THRESHOLD = 5  # changed rows before autovacuum analyzes again (plus 10 % of the rows, its default)


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (autovacuum_analyze_threshold = {ANALYZE_THRESHOLD})")
        op.execute(f"ANALYZE {table}")


def downgrade() -> None:
    # The statistics ANALYZE gathered stay (they describe the rows; nothing to undo); the threshold goes back.
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RESET (autovacuum_analyze_threshold)")
