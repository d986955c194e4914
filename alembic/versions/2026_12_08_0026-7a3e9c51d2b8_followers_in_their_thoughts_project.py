"""The rows that live in a thought's project are put back in it where an earlier move left them behind.

`memory_store update` (cwd) and a merge into another project moved the thought alone; its outgoing edges, url
links, hits, primer and the proposals about it kept the old project. The service now moves them with the thought
(`ThoughtRepository._move_followers`); this puts the rows moved before it where they belong. Migration 0025's
cluster rule looks an edge's source up in the edge's project, the console's project graph reads a project's
edges by `edge.project_id`, and a store distributed by project keeps these rows on their thought's shard.

Rows only change their project_id (no row is deleted), so the downgrade leaves them as they are: the earlier
code reads them the same.

Revision ID: 7a3e9c51d2b8
Revises: 5e0c7b2f9a14
Create Date: 2026-12-08 02:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "7a3e9c51d2b8"
down_revision: str | None = "5e0c7b2f9a14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, the column naming its thought): app.db.repositories.thoughts._FOLLOWERS, as of this revision.
_FOLLOWERS = (
    ("edge", "source_id"),
    ("thought_url_link", "thought_id"),
    ("thought_hit", "thought_id"),
    ("primer", "thought_id"),
    ("placement_proposal", "source_id"),
)


def upgrade() -> None:
    citus = op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").first()
    if citus:
        return  # distribute.sql's foreign keys on (project_id, thought_id) hold every such row in place already
    for table, column in _FOLLOWERS:
        op.execute(
            f"UPDATE {table} SET project_id = thought.project_id FROM thought "
            f"WHERE thought.id = {table}.{column} AND {table}.project_id <> thought.project_id"
        )


def downgrade() -> None:
    pass  # nothing to undo: see the docstring
