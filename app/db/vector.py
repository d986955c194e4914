"""Embedding vectors on the wire in pgvector's binary format (asyncpg).

pgvector's SQLAlchemy type sends a vector as text: Python formats 384 floats (~8 KB) and the
server parses them back, which cost more than the HNSW insert itself in the bulk_create
benchmark (docs/BENCHMARKS.md). In binary form a vector is 1.5 KB copied as is.

Two halves that belong together: `EmbeddingVector` hands asyncpg a pgvector `Vector`, and
`register_vector_codec` (run by `build_engine` on every new connection, through
`configure_vector_session`) tells asyncpg to send and read the `vector` type in binary. Engines
not built by `build_engine` (Alembic's own) keep the text format; the column type falls back to
text on every other driver.

The HNSW index holds the vectors in half precision (migration 0005): `index_distance` is the
expression a query must order by for PostgreSQL to use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pgvector import Vector
from pgvector.sqlalchemy import HALFVEC, VECTOR
from sqlalchemy import ColumnElement, bindparam, cast, literal
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import QueryableAttribute

EMBEDDING_DIM = 384

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


# The HNSW candidate list a search of the default page (limit 10, pool 100) uses: on the 100 k graphs built so far
# 200 recalled 0.9905-0.9985 @10 where 100 gave 0.986-0.9895, for about the same time at a pool of 100
# (docs/BENCHMARKS.md, fourth and fifth rounds). Larger pools raise it per transaction.
HNSW_EF_SEARCH = 200


async def configure_vector_session(connection: Any) -> None:
    """The binary codec, plus the HNSW scan settings every search of this app wants, once per connection.

    iterative_scan: a filtered HNSW scan keeps going until it has `limit` rows (pgvector stops at ef_search
    candidates otherwise). Set for the session, they save each search a round trip of SET LOCALs.
    """
    await register_vector_codec(connection)
    await connection.execute(f"SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = {HNSW_EF_SEARCH}")


def half(expression: ColumnElement[Any] | QueryableAttribute[Any]) -> ColumnElement[Any]:
    """A vector expression cast to half precision, as the HNSW index stores it."""
    return cast(expression, HALFVEC(EMBEDDING_DIM))


def vector_param(name: str) -> ColumnElement[Any]:
    """A query vector bound by name (sent as `vector` in binary), for statements built once and reused."""
    return cast(bindparam(name, type_=EmbeddingVector(EMBEDDING_DIM)), VECTOR(EMBEDDING_DIM))


def index_distance(
    column: ColumnElement[Any] | QueryableAttribute[Any], vector: Sequence[float] | ColumnElement[Any]
) -> ColumnElement[float]:
    """Cosine distance in half precision: the expression `ix_thought_embedding_hnsw` serves.

    Half precision halves the index and costs ~40 % less per insert, which pays for a better-connected
    graph (migration 0005); distances stay within ~1e-3 of the full-precision ones. A query vector is
    sent as `vector` (binary codec) and cast on the server.
    """
    if not isinstance(vector, ColumnElement):
        vector = cast(literal(Vector(list(vector)), EmbeddingVector(EMBEDDING_DIM)), VECTOR(EMBEDDING_DIM))
    distance: ColumnElement[float] = half(column).cosine_distance(half(vector))
    return distance
