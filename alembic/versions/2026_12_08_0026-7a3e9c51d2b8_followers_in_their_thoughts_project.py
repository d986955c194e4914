"""The rows that live in a thought's project follow it when it moves, by trigger; those earlier moves left behind
are put back.

A thought's outgoing edges, url links, hits, primer and the proposals about it live in its project (an edge and a
proposal in their source's). `memory_store update` (cwd) and a merge into another project moved the thought alone,
so those rows kept the old project: the console's project graph counted such edges in the old project, and 0025's
cluster rule (which looks an edge's source up in the edge's project) refused a later change of such a cluster edge.

The trigger `thought_followers_move` (statement level, after every UPDATE of `thought`, like 0009's BM25 triggers)
moves them with every thought whose project changed, whoever wrote the row: this release, a replica of the previous
one still serving during a rolling upgrade, SQL by hand. Most updates move nothing, and it costs them one join of
the statement's old and new rows. The upgrade then puts back the rows earlier moves left behind: one UPDATE per
table, joined to `thought`.

It also runs 0009's BM25 trigger on UPDATE by EXECUTE: plpgsql planned its join of the transition tables once
per connection, and after a one-row update that plan was a nested loop, quadratic in the rows of a later big one
(20.6 s for 10,000 rows, the importance decay's batches are 5,000). The new trigger does the same.

On Citus (scripts/citus/distribute.sql) a row's project is its distribution column, which Citus never lets an
UPDATE change, and the composite foreign keys there hold every such row in its thought's project: no trigger and
no repair there (a trigger on a shard could not reach the other shards anyway); the BM25 function is replaced.

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

# (table, the column naming its thought): the rows that share their thought's project.
_FOLLOWERS = (
    ("edge", "source_id"),
    ("thought_url_link", "thought_id"),
    ("thought_hit", "thought_id"),
    ("primer", "thought_id"),
    ("placement_proposal", "source_id"),
)

# The statement's thoughts whose project changed (the trigger's transition tables).
_MOVED = (
    "(SELECT n.id, n.project_id FROM before_rows o JOIN after_rows n ON n.id = o.id "
    "WHERE o.project_id <> n.project_id) AS moved"
)
_MOVES = "\n".join(
    f"    EXECUTE 'UPDATE {table} SET project_id = moved.project_id FROM {_MOVED} "
    f"WHERE {table}.{column} = moved.id AND {table}.project_id <> moved.project_id';"
    for table, column in _FOLLOWERS
)
# Most updates move nothing: one count over a join of the statement's rows, and done. Every statement runs by
# EXECUTE, so it is planned for this statement's row count: a plan cached from a one-row update (or EXISTS's fast-start plan) is a nested loop,
# quadratic in the rows: 8.8 s for a 10,000-row update, where this takes milliseconds (docs/BENCHMARKS.md).
_GUARD = (
    "SELECT count(*) FROM before_rows o JOIN after_rows n ON n.id = o.id WHERE o.project_id <> n.project_id"
)
FOLLOWERS_MOVE = f"""
CREATE FUNCTION thought_followers_move() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    EXECUTE '{_GUARD}' INTO moved;
    IF moved = 0 THEN
        RETURN NULL;
    END IF;
{_MOVES}
    RETURN NULL;
END $$
"""
# 0009's BM25 trigger on UPDATE joins the same transition tables in a statement plpgsql plans once per connection:
# after a one-row update, a 10,000-row one took 20.6 s in it (nested loop), 28 ms planned afresh. Same statement,
# now by EXECUTE.
_LEXICAL_CHANGES = (
    "SELECT lexical_count(array_agg(change.project_id), array_agg(change.tsv), array_agg(change.sign)) FROM ("
    "SELECT o.project_id, o.tsv, -1 AS sign FROM before_rows o JOIN after_rows n ON n.id = o.id "
    "WHERE o.project_id <> n.project_id OR o.tsv IS DISTINCT FROM n.tsv "
    "UNION ALL "
    "SELECT n.project_id, n.tsv, 1 FROM before_rows o JOIN after_rows n ON n.id = o.id "
    "WHERE o.project_id <> n.project_id OR o.tsv IS DISTINCT FROM n.tsv"
    ") AS change HAVING count(*) > 0"
)
LEXICAL_AFTER_UPDATE_PLANNED = f"""
CREATE OR REPLACE FUNCTION lexical_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE '{_LEXICAL_CHANGES}';
    RETURN NULL;
END $$
"""
LEXICAL_AFTER_UPDATE_CACHED = """
CREATE OR REPLACE FUNCTION lexical_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lexical_count(array_agg(change.project_id), array_agg(change.tsv), array_agg(change.sign))
    FROM (
        SELECT o.project_id, o.tsv, -1 AS sign FROM before_rows o JOIN after_rows n ON n.id = o.id
        WHERE o.project_id <> n.project_id OR o.tsv IS DISTINCT FROM n.tsv
        UNION ALL
        SELECT n.project_id, n.tsv, 1 FROM before_rows o JOIN after_rows n ON n.id = o.id
        WHERE o.project_id <> n.project_id OR o.tsv IS DISTINCT FROM n.tsv
    ) AS change
    HAVING count(*) > 0;
    RETURN NULL;
END $$
"""
TRIGGER = (
    "CREATE TRIGGER thought_followers_move AFTER UPDATE ON thought "
    "REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION thought_followers_move()"
)


def _on_citus() -> bool:
    return op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").first() is not None


def upgrade() -> None:
    op.execute(LEXICAL_AFTER_UPDATE_PLANNED)
    if _on_citus():
        return  # see the docstring
    op.execute(FOLLOWERS_MOVE)
    op.execute(TRIGGER)
    for table, column in _FOLLOWERS:
        op.execute(
            f"UPDATE {table} SET project_id = thought.project_id FROM thought "
            f"WHERE thought.id = {table}.{column} AND {table}.project_id <> thought.project_id"
        )


def downgrade() -> None:
    # The rows stay where they are: the earlier code reads them the same.
    op.execute("DROP TRIGGER IF EXISTS thought_followers_move ON thought")
    op.execute("DROP FUNCTION IF EXISTS thought_followers_move()")
    op.execute(LEXICAL_AFTER_UPDATE_CACHED)
