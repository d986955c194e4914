"""`thought.surface_after` held to the range of a time a caller may send (app.formats: 1970-01-01 to 9999-12-31 UTC).

Before this, `memory_store update` stored any time PostgreSQL takes (issue 22, B5): `0001-01-01` went in as
`-infinity`, and every read that returned the thought failed formatting it. Existing rows outside the range are
clamped to its nearest end (a draft due since the year 1 is due now, as it is at 1970; one hidden past the year 9999
stays hidden), then a CHECK keeps new ones out. The UPDATEs touch only such rows (normally none); adding the CHECK
scans `thought` once under the ALTER's lock.

Revision ID: 5d0e7a1c9b42
Revises: 5c1e8a9f3d20
Create Date: 2026-12-01 21:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "5d0e7a1c9b42"
down_revision: str | None = "5c1e8a9f3d20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EARLIEST = "'1970-01-01 00:00:00+00'::timestamptz"
LATEST = "'9999-12-31 23:59:59.999+00'::timestamptz"
NAME = "ck_thought_surface_after_range"


# Each row outside the range to its nearest end (tests/security/test_inputs.py runs these again).
REPAIRS = (
    f"UPDATE thought SET surface_after = {EARLIEST} WHERE surface_after < {EARLIEST}",
    f"UPDATE thought SET surface_after = {LATEST} WHERE surface_after > {LATEST}",
)


def upgrade() -> None:
    for statement in REPAIRS:
        op.execute(statement)
    op.execute(
        f"ALTER TABLE thought ADD CONSTRAINT {NAME} CHECK (surface_after >= {EARLIEST} AND surface_after <= {LATEST})"
    )


def downgrade() -> None:
    op.execute(f"ALTER TABLE thought DROP CONSTRAINT {NAME}")
