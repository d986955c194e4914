"""Per-project HNSW indexes: `ix_thought_embedding_hnsw`'s expression over one project's rows, for each project
too big to scan exactly and not most of the memory, the largest 64 of them at most.

A project-scoped search walks the shared graph with the project as a filter. For a project of 7-25 % of the
thoughts and a query whose neighbours lie in other projects, that walk recalled 0.82 @10 in 13-31 ms at 100 k
thoughts; a graph of the project's rows alone recalls 0.98 in ~2 ms (docs/BENCHMARKS.md, seventh round). The
price is a second graph insert for every thought of such a project, and a cost per index that every statement on
`thought` pays whatever its project: the planner opens, locks and checks each partial index, and every insert
checks each predicate (at 10 k thoughts, ~5 µs of planning per index up to 300 of them, 15 µs at 994, and ~10 kB
of each backend's relation cache; docs/BENCHMARKS.md, "Many tenants"). Hence the cap
(app.services.project_index_job.MAX_PROJECT_INDEXES).

The background jobs decide which projects get one and build, rebuild (at changed parameters) or drop it
CONCURRENTLY, so writes go on meanwhile (app.services.jobs.project_indexes). No migration knows them, so Alembic
skips them (`include_in_migrations`, alembic/env.py); a migration that changes the `embedding` column must drop
them first (the jobs build them again). A search learns of a valid one from the catalog, through the project
read (`has_project_index`), so nothing can point it at an index that is missing or half built.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import ColumnElement, Text, cast, column, exists, func, select, table, text

from app.db import graphs
from app.db.graphs import Graph

PREFIX = "ix_thought_hnsw_project_"  # + the project id's 32 hex digits: 56 characters, under the 63 allowed

_pg_index = table("pg_index", column("indexrelid"), column("indisvalid"), schema="pg_catalog")


def project_index_name(project_id: uuid.UUID) -> str:
    return PREFIX + project_id.hex


def is_project_index(name: str | None) -> bool:
    return name is not None and name.startswith(PREFIX)


def include_in_migrations(_object: Any, name: str | None, type_: str, _reflected: bool, _compare_to: Any) -> bool:
    """Alembic's `include_object`: autogenerate leaves the project indexes alone (the jobs own them)."""
    return not (type_ == "index" and is_project_index(name))


def has_project_index(project_id: Any) -> ColumnElement[bool]:
    """Whether the project (an id column) has a valid index: one catalog lookup by name."""
    name = PREFIX + func.replace(cast(project_id, Text), "-", "")
    return exists(
        select(1).select_from(_pg_index).where(_pg_index.c.indexrelid == func.to_regclass(name), _pg_index.c.indisvalid)
    )


# m 12 with ef_construction 256. A project's graph is walked for queries whose neighbours lie in other projects
# too: at 100 k thoughts, the 25 % project's recall@10 for such queries at ef_search 200 was 0.92-0.96 over three
# builds with ef_construction 128 and 0.975-0.988 over four with 256 (0.99 needed ef_search 400 with 128: +1 ms per
# search). The price is ~0.5 ms more per insert (docs/BENCHMARKS.md, seventh round). m 16 (ef_construction 200 or
# 256) recalled no better for the 50 % project of 100 k e5 thoughts over three builds each (docs/BENCHMARKS.md,
# HNSW recall, thirteenth round), unlike the shared graph's (app.db.graphs.SHARED_GRAPH). The job rebuilds an
# existing index whose parameters differ from these (its reloptions), so a change here reaches every store.
GRAPH_PARAMETERS = Graph(m=12, ef_construction=256)


def create_statement(project_id: uuid.UUID, suffix: str = "") -> str:
    """The DDL of a project's index (under its name + `suffix`: a rebuild's replacement): the shared index's
    expression over the project's rows. The project is a literal (a uuid's text, nothing from a caller), as a
    partial index's predicate must be."""
    name = project_index_name(project_id) + suffix
    return graphs.create_statement(name, GRAPH_PARAMETERS, predicate=f"project_id = '{project_id}'::uuid")


def is_rebuild_leftover(name: str) -> bool:
    """A replacement or a replaced index a rebuild cut short left (app.db.graphs)."""
    return name.endswith((graphs.NEXT_SUFFIX, graphs.RETIRED_SUFFIX))


def drop_statement(name: str) -> str:
    # Names come from the catalog: only ours (a project's index, or a rebuild's leftover of one) are dropped.
    suffixes = f"({graphs.NEXT_SUFFIX}|{graphs.RETIRED_SUFFIX})?"
    if not re.fullmatch(PREFIX + "[0-9a-f]{32}" + suffixes, name):
        raise ValueError(f"not a project index: {name!r}")
    return graphs.drop_statement(name)


EXISTING_INDEXES = text(
    "SELECT c.relname AS name, i.indisvalid AS valid, c.reloptions FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid "
    f"WHERE i.indrelid = 'thought'::regclass AND starts_with(c.relname, '{PREFIX}')"
)
