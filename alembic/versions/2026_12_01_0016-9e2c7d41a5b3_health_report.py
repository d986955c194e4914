"""The stored health report: `health_report`, one row holding the last report with when, how long and who asked.

The background job (app.services.jobs.background, every `health.report_interval_minutes`) and the console's Check now
replace it, so the console's health page reads it instead of running every check (~0.3 s at 100 k thoughts,
docs/BENCHMARKS.md "Console pages at 100 k"). A new table only: no lock on existing ones.

Revision ID: 9e2c7d41a5b3
Revises: 673904fe902f
Create Date: 2026-12-01 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "9e2c7d41a5b3"
down_revision: str | None = "673904fe902f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "health_report",
        sa.Column("one", sa.Boolean(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("replica", sa.String(length=200), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=True),
        sa.Column("report", postgresql.JSON(astext_type=sa.Text()), nullable=False),
        sa.CheckConstraint("one", name=op.f("ck_health_report_one_row")),
        sa.PrimaryKeyConstraint("one", name=op.f("pk_health_report")),
    )


def downgrade() -> None:
    op.drop_table("health_report")
