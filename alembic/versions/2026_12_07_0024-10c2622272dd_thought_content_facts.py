"""Per-row content facts on `thought` for the health report, added without rewriting the table: `lexemes`
(length(tsv)) and `content_md5` (md5(content) as a uuid), a batched backfill, and the report's indexes built
CONCURRENTLY.

The health report read the whole `thought` heap twice (its one pass over `thought`, which sums length(tsv) for the
BM25 drift check, and duplicate_content, which groups by content) and a third time for importance_outliers:
most of its ~410 ms of PostgreSQL CPU at 100 k thoughts (docs/BENCHMARKS.md, "Check now"). With these facts and
the row checks' partial indexes, its counts are index-only (app.services.status.health).

Stored generated columns would do the same, but adding one rewrites `thought` and rebuilds every index under the
table's ACCESS EXCLUSIVE lock (282 s measured at 100 k thoughts, ~25 min estimated at 1 M), and every replica still
serving would wait for it. So:

- plain NULLable columns without a default: a catalog change, the lock held for milliseconds (taken with a
  lock_timeout and retried, so it never queues every reader behind a long transaction);
- the backfill by ranges of BATCH ids, each range in passes of one row per heap page, each pass its own transaction
  (rows are locked for a pass, tens of milliseconds): no index covers the new columns yet, and a page has room
  for one more row version (fillfactor 70), so the updates stay HOT instead of inserting into every index, the HNSW
  graphs included;
- then the indexes CONCURRENTLY (writes go on), an invalid leftover of an interrupted run built again; the BRIN
  index on importance only from PostgreSQL 16 on (below, it would make the decay's updates leave HOT);
- a statistics object on the stale-facts test and an ANALYZE, so the planner knows the stale rows are few.

The application writes the facts with the content from then on (app.db.repositories.thoughts). A row written
otherwise — by a replica still running the previous release, a restore, or SQL by hand — has missing or stale
facts, and `ix_thought_content_facts_stale` holds exactly those rows (its predicate is evaluated by PostgreSQL for
every writer): the report reads them from the heap and stays exact. The backfill completes before the migration
ends, so afterwards only such rows are in that index (none, when every replica runs this release).

`migrate` (and `serve`'s start) waits for all of it: 4–13 s per 100 k thoughts here; the old row versions the
backfill leaves are autovacuum's (docs/DEPLOY.md).

Revision ID: 10c2622272dd
Revises: c4a1ce99e392
Create Date: 2026-12-07 18:30:00
"""

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from alembic import op

revision: str = "10c2622272dd"
down_revision: str | None = "c4a1ce99e392"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000
DIFFER = "lexemes IS DISTINCT FROM length(tsv) OR content_md5 IS DISTINCT FROM md5(content)::uuid"
STALE = f"({DIFFER}) IS TRUE"
STATISTICS = "thought_content_facts_stale"
INDEXES = (
    (
        "ix_thought_project_content_facts",
        "(project_id, content_md5) INCLUDE (status, is_global, is_cluster, lexemes)",
    ),
    ("ix_thought_content_facts_stale", f"(id) WHERE {STALE}"),
    ("ix_thought_id_facts", "(id) INCLUDE (project_id, is_global, status, is_cluster)"),
    ("ix_thought_untagged", "(id) INCLUDE (project_id, is_global, status) WHERE cardinality(tags) = 0"),
    ("ix_thought_short_content", "(id) INCLUDE (project_id, is_global, status) WHERE length(btrim(content)) < 10"),
    (
        "ix_thought_drafts_created",
        "(created_at) INCLUDE (id, project_id, is_global, surface_after) WHERE status = 'draft'",
    ),
)
# Summarizing: HOT updates of importance (the decay's) leave it be only from PostgreSQL 16 on; on 15 it would send
# every decayed row into every index, the HNSW graphs included, so it is not built there.
IMPORTANCE = ("ix_thought_importance_brin", "USING brin (importance) WITH (autosummarize = on)")
SUMMARIZING_HOT = 160000  # server_version_num
PASS = (
    "UPDATE thought SET lexemes = length(tsv), content_md5 = md5(content)::uuid WHERE id IN ("
    "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY (ctid::text::point)[0] ORDER BY ctid) AS place "
    f"FROM thought WHERE id > :after AND id <= :upto AND {STALE}) AS stale WHERE place = 1) AND {STALE}"
)
LOCK_TIMEOUT = "5s"
LOCK_ATTEMPTS = 60  # then it waits as long as it takes
RETRIED = {"55P03", "40P01"}  # lock_not_available, deadlock_detected


def _sqlstate(error: DBAPIError) -> str | None:
    cause = error.orig.__cause__ if error.orig is not None else None
    return getattr(cause, "sqlstate", None) or getattr(error.orig, "sqlstate", None)


def _retried(sql: str, parameters: dict[str, object] | None = None, attempts: int = LOCK_ATTEMPTS) -> Any:
    """Run a statement in its own transaction, again after a lock timeout or a deadlock (a serving replica holds
    the lock or the rows); the last attempt without a lock timeout."""
    bind = op.get_bind()
    for attempt in range(attempts):
        last = attempt == attempts - 1
        bind.execute(text(f"SET lock_timeout = '{'0' if last else LOCK_TIMEOUT}'"))
        try:
            return bind.execute(text(sql), parameters or {})
        except DBAPIError as error:
            if last or _sqlstate(error) not in RETRIED:
                raise
            time.sleep(1)
        finally:
            bind.execute(text("RESET lock_timeout"))
    raise AssertionError("unreachable")


def _backfill() -> None:
    bind = op.get_bind()
    after = "00000000-0000-0000-0000-000000000000"
    while True:
        upto = bind.execute(
            text(
                "SELECT id FROM (SELECT id FROM thought WHERE id > :after ORDER BY id LIMIT :batch) AS batch "
                "ORDER BY id DESC LIMIT 1"
            ),
            {"after": after, "batch": BATCH},
        ).scalar_one_or_none()
        if upto is None:
            return
        # One row of each heap page per pass, each pass its own transaction: a page has room for about one more
        # row version (fillfactor 70), and once a pass commits the old versions can be pruned, so the next pass's
        # updates stay HOT too. Updated at once, the second and third rows of a page moved to another page and were
        # inserted into every index, the HNSW graphs included: 9 % of the rows of a compacted 100 k store, 27 s.
        updated = 1
        while updated:
            updated = _retried(PASS, {"after": after, "upto": upto}).rowcount
        after = upto


def upgrade() -> None:
    with op.get_context().autocommit_block():  # each statement its own transaction; CONCURRENTLY needs that
        _retried(
            "ALTER TABLE thought ADD COLUMN IF NOT EXISTS lexemes integer, ADD COLUMN IF NOT EXISTS content_md5 uuid"
        )
        _backfill()
        version = op.get_bind().execute(text("SELECT current_setting('server_version_num')::int")).scalar_one()
        for name, definition in (*INDEXES, *((IMPORTANCE,) if version >= SUMMARIZING_HOT else ())):
            valid = op.get_bind().execute(
                text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"), {"name": name}
            )
            found = valid.scalar_one_or_none()
            if found:  # built by a run cut short after it
                continue
            if found is not None:  # an interrupted CONCURRENTLY build leaves an invalid index: built again
                op.execute(f"DROP INDEX CONCURRENTLY {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON thought {definition}")
        # The planner's estimate of the stale rows (none, once backfilled): without it, it guesses a large share and
        # reads the heap. ANALYZE also gives the new columns their statistics (a sample: seconds at 1 M).
        op.execute(f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} ON (({DIFFER})) FROM thought")
        op.execute("ANALYZE thought")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")
        for name, _definition in reversed((*INDEXES, IMPORTANCE)):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        # Dropping a column is a catalog change too: no rewrite.
        _retried("ALTER TABLE thought DROP COLUMN IF EXISTS content_md5, DROP COLUMN IF EXISTS lexemes")
