"""The shared HNSW graph at app.db.graphs.SHARED_GRAPH (m 16, ef_construction 200), rebuilt CONCURRENTLY.

At 100 k e5 thoughts the unscoped walk of m 12 / ef_construction 128 (migration 0005) recalled 0.929-0.982 @10 at
ef_search 400 over eight builds, under the 0.95 target on four; m 16 / ef_construction 200 recalled 0.976-0.996
over six (docs/BENCHMARKS.md, "Fourteenth session: the shared graph").

The rebuild is CONCURRENTLY, under another name, then swapped (app.db.graphs): a plain DROP and CREATE INDEX holds
the table's ACCESS EXCLUSIVE lock for the whole build (1-2.5 minutes per 100 k thoughts on 2 cores, 880 s measured
at 1 M), so every search and write of a replica still serving would wait for it; this way they go on
through the old graph until the new one takes its name. `migrate` itself still waits for the build (docs/DEPLOY.md).

The upgrade converges to the declared graph: an index already built with those parameters is left as it is, so a
later migration that changes SHARED_GRAPH does not make this one build twice. A run cut short leaves a
`…_next` or `…_old` index, which the next run drops first. The downgrade restores 0005's graph.

Revision ID: c4a1ce99e392
Revises: 8e4f1a6c2d93
Create Date: 2026-12-02 14:30:00
"""

from collections.abc import Sequence

from sqlalchemy import text

from alembic import op
from app.db import graphs

revision: str = "c4a1ce99e392"
down_revision: str | None = "8e4f1a6c2d93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MIGRATION_0005_GRAPH = graphs.Graph(m=12, ef_construction=128)
# Room to build the graph in memory, as migrations 0002/0005 gave it (a graph spilled past maintenance_work_mem
# recalls less); a server or role configured with more keeps its own (a 1 M store's graph is ~1.2 GB).
MIN_MAINTENANCE_WORK_MEM_KB = 512 * 1024


def _rebuild(graph: graphs.Graph) -> None:
    name = graphs.SHARED_INDEX
    with op.get_context().autocommit_block():  # CONCURRENTLY runs outside a transaction
        built = _build_next(name, graph)
    if not built:
        return
    for statement in graphs.swap_statements(name):  # one transaction: the replacement takes the name
        op.execute(statement)
    with op.get_context().autocommit_block():
        op.execute(graphs.drop_statement(name + graphs.RETIRED_SUFFIX))


def _build_next(name: str, graph: graphs.Graph) -> bool:
    """The replacement built beside the graph, unless the graph already has these parameters."""
    bind = op.get_bind()
    for leftover in graphs.leftover_names(name):
        op.execute(graphs.drop_statement(leftover))
    reloptions = bind.execute(text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:n)"), {"n": name})
    if graph.matches(reloptions.scalar_one_or_none()):
        return False
    memory = bind.execute(text("SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'"))
    raised = memory.scalar_one() < MIN_MAINTENANCE_WORK_MEM_KB
    if raised:
        op.execute(f"SET maintenance_work_mem = '{MIN_MAINTENANCE_WORK_MEM_KB}kB'")
    op.execute(graphs.create_statement(name + graphs.NEXT_SUFFIX, graph))
    if raised:
        op.execute("RESET maintenance_work_mem")
    return True


def upgrade() -> None:
    _rebuild(graphs.SHARED_GRAPH)


def downgrade() -> None:
    _rebuild(MIGRATION_0005_GRAPH)
