"""HNSW index with m = 12, and an index for duplicate-content lookups.

m 12 instead of 16 costs a third less index maintenance per inserted vector at the same recall@10
(measured at 100 k thoughts, docs/BENCHMARKS.md). `md5(content)` per project serves the
duplicate-content check of store/bulk_create, which scanned the whole project before.

Revision ID: 5c1f0e9a7d42
Revises: 811747b0cacb
Create Date: 2026-11-30 05:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c1f0e9a7d42"
down_revision: str | None = "811747b0cacb"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _hnsw(m: int) -> None:
    # Room to build the graph in memory: measured at 100 k thoughts, a graph built past
    # maintenance_work_mem (64 MB by default) recalled less (0.979 against 0.994 at ef_search 200).
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.drop_index("ix_thought_embedding_hnsw", table_name="thought")
    op.create_index(
        "ix_thought_embedding_hnsw",
        "thought",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": m, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def upgrade() -> None:
    _hnsw(12)
    op.create_index(
        "ix_thought_project_content_md5", "thought", ["project_id", sa.literal_column("md5(content)")], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_thought_project_content_md5", table_name="thought")
    _hnsw(16)
