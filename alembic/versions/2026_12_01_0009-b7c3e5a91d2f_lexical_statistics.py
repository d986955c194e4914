"""BM25 statistics: per-project corpus sizes and lexeme document frequencies, kept by triggers.

The lexical leg ranks by Okapi BM25 over the `english` tsvector (app.db.repositories.search), which needs
each lexeme's document frequency and the corpus's size and average length, per project for a scoped
search and summed over the projects for an unscoped one. PostgreSQL keeps them without an extension:

- `lexical_corpus (project_id, thoughts, tokens)`: thoughts of every status, and the sum of their lengths;
  a thought's length is the number of distinct lexemes of its tsvector (`length(tsv)`, computed in C: the
  leg reads it for every candidate);
- `lexical_term (lexeme, project_id, thoughts)`: how many of the project's thoughts hold the lexeme
  (rows reaching zero are deleted).

Statement-level AFTER triggers on `thought` (transition tables) apply every INSERT, DELETE and UPDATE in
the writing transaction, so every write path — create, update, bulk_create, merge, delete, compact,
import, a project's deletion moving its thoughts, and any path added later — keeps them exact; an UPDATE
that changes neither `tsv` nor `project_id` (importance, status, embedding) adds nothing. The corpus row
is written first, in project order: it queues a project's writers before any lexeme row is locked, so two
writers cannot take lexeme rows in opposite orders. `lexical_rebuild(project)` recounts a project from its
rows (this migration, and the health check's fix for drift).

Revision ID: b7c3e5a91d2f
Revises: 7d2b4e9f1a6c
Create Date: 2026-12-01 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "b7c3e5a91d2f"
down_revision: str | None = "7d2b4e9f1a6c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTIONS = (
    """
    CREATE FUNCTION lexical_count(projects uuid[], tsvs tsvector[], signs integer[]) RETURNS void
    LANGUAGE plpgsql AS $$
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
    """,
    """
    CREATE FUNCTION lexical_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM lexical_count(array_agg(project_id), array_agg(tsv), array_agg(1))
        FROM added HAVING count(*) > 0;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION lexical_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM lexical_count(array_agg(project_id), array_agg(tsv), array_agg(-1))
        FROM removed HAVING count(*) > 0;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION lexical_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
    END
    $$
    """,
    """
    CREATE FUNCTION lexical_rebuild(project uuid) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        -- The corpus row first, as the triggers take it: a writer under way commits before the recount reads.
        INSERT INTO lexical_corpus (project_id, thoughts, tokens) VALUES (project, 0, 0)
        ON CONFLICT (project_id) DO UPDATE SET thoughts = lexical_corpus.thoughts;
        UPDATE lexical_corpus c SET thoughts = a.thoughts, tokens = a.tokens
        FROM (
            SELECT count(*) AS thoughts, coalesce(sum(length(tsv)), 0) AS tokens
            FROM thought WHERE project_id = project
        ) AS a
        WHERE c.project_id = project;
        DELETE FROM lexical_term WHERE project_id = project;
        INSERT INTO lexical_term (lexeme, project_id, thoughts)
        SELECT w.lexeme, project, count(*)
        FROM thought t CROSS JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS w(lexeme)
        WHERE t.project_id = project
        GROUP BY w.lexeme;
    END
    $$
    """,
)

TRIGGERS = (
    "CREATE TRIGGER thought_lexical_insert AFTER INSERT ON thought REFERENCING NEW TABLE AS added "
    "FOR EACH STATEMENT EXECUTE FUNCTION lexical_after_insert()",
    "CREATE TRIGGER thought_lexical_delete AFTER DELETE ON thought REFERENCING OLD TABLE AS removed "
    "FOR EACH STATEMENT EXECUTE FUNCTION lexical_after_delete()",
    "CREATE TRIGGER thought_lexical_update AFTER UPDATE ON thought "
    "REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION lexical_after_update()",
)


def upgrade() -> None:
    op.create_table(
        "lexical_corpus",
        sa.Column("project_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("thoughts", sa.BigInteger(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], name="fk_lexical_corpus_project_id_project", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", name="pk_lexical_corpus"),
    )
    op.create_table(
        "lexical_term",
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("project_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("thoughts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], name="fk_lexical_term_project_id_project", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("lexeme", "project_id", name="pk_lexical_term"),
    )
    for statement in FUNCTIONS:
        op.execute(statement)
    # The triggers lock `thought` against writes until this transaction commits, so the recount below and
    # the triggers see the same rows.
    for statement in TRIGGERS:
        op.execute(statement)
    op.execute("SELECT lexical_rebuild(id) FROM project ORDER BY id")


def downgrade() -> None:
    for name in ("thought_lexical_update", "thought_lexical_delete", "thought_lexical_insert"):
        op.execute(f"DROP TRIGGER {name} ON thought")
    for function in (
        "lexical_rebuild(uuid)",
        "lexical_after_update()",
        "lexical_after_delete()",
        "lexical_after_insert()",
        "lexical_count(uuid[], tsvector[], integer[])",
    ):
        op.execute(f"DROP FUNCTION {function}")
    op.drop_table("lexical_term")
    op.drop_table("lexical_corpus")
