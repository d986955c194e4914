"""Per-project membership: `project_member` (user_id NULL = everyone) and every project open to everyone.

A caller sees the projects they (or everyone) are a member of, with the lower of their global role and their
role there (app.db.visibility). So that nothing changes for a team that never uses membership, every project
that exists gets an everyone row with role `admin` (the effective role is then the global role, as before),
and the trigger `project_open_to_everyone` gives every project inserted later the same row, whoever inserts
it (the service, an import, a script). An admin closes a project by removing its everyone row
(`synaptomind member remove PROJECT --everyone`). New table only: no lock on existing ones beyond the trigger.

Revision ID: 01bdcfeead22
Revises: 9e2c7d41a5b3
Create Date: 2026-12-01 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "01bdcfeead22"
down_revision: str | None = "9e2c7d41a5b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The type exists since 0001: reuse it, never create or drop it here.
USER_ROLE = postgresql.ENUM("admin", "writer", "reader", name="user_role", create_type=False)

OPEN_TO_EVERYONE = """
CREATE FUNCTION project_open_to_everyone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A new project is open to everyone (as every project was before membership) until an admin closes it.
    INSERT INTO project_member (id, project_id, user_id, role) VALUES (gen_random_uuid(), NEW.id, NULL, 'admin');
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    op.create_table(
        "project_member",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=True),
        sa.Column("role", USER_ROLE, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], name=op.f("fk_project_member_project_id_project"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["app_user.id"], name=op.f("fk_project_member_user_id_app_user"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_member")),
    )
    op.create_index(op.f("ix_project_member_user_id"), "project_member", ["user_id"], unique=False)
    op.create_index(
        "uq_project_member_project_user",
        "project_member",
        ["project_id", "user_id"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.execute(
        "INSERT INTO project_member (id, project_id, user_id, role) "
        "SELECT gen_random_uuid(), id, NULL, 'admin' FROM project"
    )
    op.execute(OPEN_TO_EVERYONE)
    op.execute(
        "CREATE TRIGGER project_open_to_everyone AFTER INSERT ON project "
        "FOR EACH ROW EXECUTE FUNCTION project_open_to_everyone()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS project_open_to_everyone ON project")
    op.execute("DROP FUNCTION IF EXISTS project_open_to_everyone()")
    op.drop_index("uq_project_member_project_user", table_name="project_member", postgresql_nulls_not_distinct=True)
    op.drop_index(op.f("ix_project_member_user_id"), table_name="project_member")
    op.drop_table("project_member")
