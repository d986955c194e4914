"""`project.thought_estimate(_at)`: how many live thoughts a project had, and when, for the vector leg's plan.

A project-filtered HNSW walk through a small share of the table recalled 0.80 @10 in 30-40 ms for
queries whose neighbours lie in other projects, where an exact scan of a 3 000-thought project takes
2.5 ms (docs/BENCHMARKS.md, sixth round). PostgreSQL picks between the two by its cost estimates, and
on a compact table it picked the walk. The vector leg now scans a project of at most
EXACT_SCAN_MAX_ROWS thoughts exactly, reading these columns (a primary-key lookup) to decide. The
background jobs refresh them every tick; this migration fills them once. An estimate older than
ESTIMATE_FRESH_FOR (no replica runs the jobs, e.g. `stdio` alone) leaves the choice to PostgreSQL.

Revision ID: 7d2b4e9f1a6c
Revises: c5e19b7a3d24
Create Date: 2026-11-30 13:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "7d2b4e9f1a6c"
down_revision: str | None = "c5e19b7a3d24"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("project", sa.Column("thought_estimate", sa.Integer(), server_default="0", nullable=False))
    op.add_column("project", sa.Column("thought_estimate_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE project p SET thought_estimate = coalesce(c.n, 0), thought_estimate_at = now() FROM project q "
        "LEFT JOIN (SELECT project_id, count(*) AS n FROM thought WHERE status <> 'archived' GROUP BY project_id) c "
        "ON c.project_id = q.id WHERE p.id = q.id"
    )


def downgrade() -> None:
    op.drop_column("project", "thought_estimate_at")
    op.drop_column("project", "thought_estimate")
