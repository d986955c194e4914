"""Background job state: `job_run`, the last run of each job (start, end, outcome, which replica ran it).

One row per job, upserted by the replica that ran it (app.services.jobs.runs), so the console's operations
page shows the same state on every replica. A new table only: no lock on existing ones.

Revision ID: 4d942f70f239
Revises: f3c8a1d6b294
Create Date: 2026-12-01 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "4d942f70f239"
down_revision: str | None = "f3c8a1d6b294"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_run",
        sa.Column("job", sa.String(length=100), nullable=False),
        sa.Column("replica", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("succeeded", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("last_succeeded_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("job", name=op.f("pk_job_run")),
    )


def downgrade() -> None:
    op.drop_table("job_run")
