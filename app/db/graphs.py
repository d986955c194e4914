"""The HNSW graphs over `thought.embedding`: the parameters each is declared with, and the statements that rebuild
one under its own name with no moment without it.

The shared graph `ix_thought_embedding_hnsw` (every thought; models.py declares it, migration 0023 converges an
existing store to it) and the per-project graphs (app.db.project_indexes; the background job converges them) read
their parameters from here only. An index's parameters are its reloptions in the catalog, so an existing store
is compared with what the code declares, not with what an index's name says.

A rebuild: `CREATE INDEX CONCURRENTLY` of the replacement under NEXT_SUFFIX (writes and searches go on through the
old graph), then one transaction renames the old one to RETIRED_SUFFIX and the replacement to the name (the
planner sees both graphs throughout; a lookup by name sees one or the other), then `DROP INDEX CONCURRENTLY` of
the retired one. A rebuild cut short leaves a NEXT or RETIRED index behind, which the next rebuild drops first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.db.vector import EMBEDDING_DIM

SHARED_INDEX = "ix_thought_embedding_hnsw"
NEXT_SUFFIX = "_next"  # the replacement while it builds
RETIRED_SUFFIX = "_old"  # the replaced graph until it is dropped
# The index's expression, as models.py declares it and the queries order by (app.db.vector.index_distance).
EXPRESSION = f"(embedding::halfvec({EMBEDDING_DIM})) halfvec_cosine_ops"


@dataclass(frozen=True)
class Graph:
    """An HNSW graph's build parameters."""

    m: int
    ef_construction: int

    def options(self) -> dict[str, int]:
        """As SQLAlchemy's `postgresql_with` takes them."""
        return {"m": self.m, "ef_construction": self.ef_construction}

    def clause(self) -> str:
        return ", ".join(f"{key} = {value}" for key, value in self.options().items())

    def matches(self, reloptions: Sequence[str] | None) -> bool:
        """Whether an index's catalog reloptions (`pg_class.reloptions`, e.g. ['m=12', 'ef_construction=128'])
        are these parameters; an index built without a WITH clause (NULL: pgvector's defaults) is not."""
        return sorted(reloptions or []) == sorted(f"{key}={value}" for key, value in self.options().items())


# m 16 / ef_construction 200: at 100 k e5 thoughts the unscoped walk at ef_search 400 recalled 0.929-0.982 @10
# over five builds of m 12 / ef_construction 128 and 0.939-0.953 over three more (four of eight under the 0.95
# target), against 0.990-0.996 and 0.976-0.985 over three builds each of m 16 / 200, whose denser links reach
# more often a small bloc of near-duplicates the sparser graph enters through too few edges. The price: a build
# 1.2-3.4x as long, a graph 12 % larger and ~1.3 ms more CPU per written thought (docs/BENCHMARKS.md, thirteenth
# round and "Fourteenth session: the shared graph").
SHARED_GRAPH = Graph(m=16, ef_construction=200)


def create_statement(name: str, graph: Graph, predicate: str | None = None) -> str:
    """`CREATE INDEX CONCURRENTLY` of a graph over the shared expression (a partial one with `predicate`)."""
    where = f" WHERE {predicate}" if predicate else ""
    return (
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON thought USING hnsw ({EXPRESSION}) '
        f"WITH ({graph.clause()}){where}"
    )


def swap_statements(name: str) -> list[str]:
    """Run in one transaction, once `name + NEXT_SUFFIX` is valid: the replacement takes the name."""
    return [
        f'ALTER INDEX IF EXISTS "{name}" RENAME TO "{name}{RETIRED_SUFFIX}"',  # a store that lost it gets it back
        f'ALTER INDEX "{name}{NEXT_SUFFIX}" RENAME TO "{name}"',
    ]


def leftover_names(name: str) -> list[str]:
    """The indexes a rebuild of `name` cut short may have left."""
    return [name + NEXT_SUFFIX, name + RETIRED_SUFFIX]


def drop_statement(name: str) -> str:
    return f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'
