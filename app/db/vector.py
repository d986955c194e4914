"""Embedding vectors on the wire in pgvector's binary format (asyncpg).

pgvector's SQLAlchemy type sends a vector as text: Python formats 384 floats (~8 KB) and the
server parses them back, which cost more than the HNSW insert itself in the bulk_create
benchmark (docs/BENCHMARKS.md). In binary form a vector is 1.5 KB copied as is.

Two halves that belong together: `EmbeddingVector` hands asyncpg a pgvector `Vector`, and
`register_vector_codec` (run by `build_engine` on every new connection) tells asyncpg to send
and read the `vector` type in binary. Engines not built by `build_engine` (Alembic's own) keep
the text format; the column type falls back to text on every other driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pgvector import Vector
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.engine import Dialect

_VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.typname = 'vector'"
)


class EmbeddingVector(VECTOR):
    """pgvector's `vector(n)`; with asyncpg the driver receives `Vector` objects (binary codec)."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        if dialect.driver != "asyncpg":
            return super().bind_processor(dialect)  # type: ignore[no-any-return]

        def process(value: Any) -> Vector | None:
            if value is None or isinstance(value, Vector):
                return value
            return Vector(value)  # a list of floats or a 1-d numpy array

        return process


def _encode(value: Any) -> bytes:
    if isinstance(value, str):  # a literal such as '[1,2,3]' bound by hand
        value = Vector.from_text(value)
    elif not isinstance(value, Vector):
        value = Vector(value)
    encoded: bytes = value.to_binary()
    return encoded


async def register_vector_codec(connection: Any) -> None:
    """Binary codec for `vector` on one asyncpg connection (skipped while the extension is absent)."""
    schema = await connection.fetchval(_VECTOR_SCHEMA)
    if schema is None:
        return
    await connection.set_type_codec(
        "vector", schema=schema, encoder=_encode, decoder=Vector.from_binary, format="binary"
    )
