"""The schema's rules in forms a Citus shard can run (docs/DEPLOY.md, "Citus"), the same rules on one node.

On Citus a trigger runs on the shard its row is in, and may reach only shards on that node. Two triggers broke that:

- `lexical_count` deleted spent lexeme rows with one DELETE joined to the changed rows, which Citus sends to every
  shard of `lexical_term`. It now deletes project by project (`project_id = …`): each DELETE is routed to the shard
  co-located with the changed rows. The counts it writes are unchanged.
- `edge_cluster_source_check` looked the edge's source up by id alone, which is every shard of `thought`. An edge
  lives in its source's project (the service writes it so, and moves the two together), so the lookup now names the
  project too: the same row, on the edge's own shard.

The third, `project_open_to_everyone` (on `project`, writing `project_member`: both reference tables on Citus, which
a trigger on a shard cannot write), stays on one node: replicas of the previous release still rely on it while a
rolling upgrade runs. `ProjectRepository` writes the same row itself (a no-op where the trigger did), and
scripts/citus/distribute.sql drops the trigger.

Revision ID: 5e0c7b2f9a14
Revises: 10c2622272dd
Create Date: 2026-12-07 23:45:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "5e0c7b2f9a14"
down_revision: str | None = "10c2622272dd"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNT_HEAD = """
CREATE OR REPLACE FUNCTION lexical_count(projects uuid[], tsvs tsvector[], signs integer[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    project uuid;
    spent text[];
BEGIN
    INSERT INTO lexical_corpus AS c (project_id, thoughts, tokens)
    SELECT d.project_id, sum(d.sign), sum(d.sign * length(d.tsv))
    FROM unnest(projects, tsvs, signs) AS d(project_id, tsv, sign)
    GROUP BY d.project_id
    ORDER BY d.project_id
    ON CONFLICT (project_id) DO UPDATE
        SET thoughts = c.thoughts + excluded.thoughts, tokens = c.tokens + excluded.tokens;
    INSERT INTO lexical_term AS t (lexeme, project_id, thoughts)
    SELECT w.lexeme, d.project_id, sum(d.sign)
    FROM unnest(projects, tsvs, signs) AS d(project_id, tsv, sign)
    CROSS JOIN LATERAL unnest(tsvector_to_array(d.tsv)) AS w(lexeme)
    GROUP BY w.lexeme, d.project_id
    HAVING sum(d.sign) <> 0
    ORDER BY w.lexeme, d.project_id
    ON CONFLICT (lexeme, project_id) DO UPDATE SET thoughts = t.thoughts + excluded.thoughts;
"""

LEXICAL_COUNT_BY_PROJECT = (
    _COUNT_HEAD
    + """
    IF -1 = ANY(signs) THEN
        FOR project, spent IN
            SELECT d.project_id, array_agg(DISTINCT w.lexeme)
            FROM unnest(projects, tsvs, signs) AS d(project_id, tsv, sign)
            CROSS JOIN LATERAL unnest(tsvector_to_array(d.tsv)) AS w(lexeme)
            WHERE d.sign < 0
            GROUP BY d.project_id
            ORDER BY d.project_id
        LOOP
            DELETE FROM lexical_term WHERE project_id = project AND lexeme = ANY(spent) AND thoughts <= 0;
        END LOOP;
    END IF;
END
$$
"""
)

# 0009's deletion, for the downgrade (its DECLAREd variables go unused there).
LEXICAL_COUNT_JOINED = (
    _COUNT_HEAD
    + """
    IF -1 = ANY(signs) THEN
        DELETE FROM lexical_term t
        USING (
            SELECT DISTINCT w.lexeme, d.project_id
            FROM unnest(projects, tsvs, signs) AS d(project_id, tsv, sign)
            CROSS JOIN LATERAL unnest(tsvector_to_array(d.tsv)) AS w(lexeme)
            WHERE d.sign < 0
        ) AS gone
        WHERE t.lexeme = gone.lexeme AND t.project_id = gone.project_id AND t.thoughts <= 0;
    END IF;
END
$$
"""
)

_CLUSTER_SOURCE_CHECK = """
CREATE OR REPLACE FUNCTION edge_cluster_source_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only a cluster thought may carry a cluster edge (it is the edge's source).
    IF NEW.type = 'cluster' AND NOT EXISTS (
        SELECT 1 FROM thought WHERE {source} AND is_cluster
    ) THEN
        RAISE EXCEPTION 'cluster edge source % is not a cluster thought', NEW.source_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_edge_cluster_source';
    END IF;
    RETURN NEW;
END $$
"""
CLUSTER_SOURCE_IN_EDGE_PROJECT = _CLUSTER_SOURCE_CHECK.format(
    source="project_id = NEW.project_id AND id = NEW.source_id"
)
CLUSTER_SOURCE_BY_ID = _CLUSTER_SOURCE_CHECK.format(source="id = NEW.source_id")


def upgrade() -> None:
    op.execute(LEXICAL_COUNT_BY_PROJECT)
    op.execute(CLUSTER_SOURCE_IN_EDGE_PROJECT)


def downgrade() -> None:
    op.execute(CLUSTER_SOURCE_BY_ID)
    op.execute(LEXICAL_COUNT_JOINED)
