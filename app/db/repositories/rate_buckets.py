"""The shared rate limits' buckets (`rate_bucket`): the per-token tool limit's and the password sign-in throttle's.
One statement takes a call from a bucket, refilling it first; another forgets the buckets that are full again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.engine import execute_core
from app.db.visibility import UNSCOPED

# Refill by the time since the last take (never negative: a clock that stepped back refills nothing), cap at the
# capacity, then take one if a whole one is there. The row lock of ON CONFLICT orders concurrent takes of one key,
# so two workers never both spend the last token. A new key starts full, minus this call.
TAKE = text(
    """
    INSERT INTO rate_bucket AS b (key, tokens, stamp, granted)
    VALUES (:key, :capacity - 1, coalesce(CAST(:at AS timestamptz), now()), true)
    ON CONFLICT (key) DO UPDATE SET (tokens, stamp, granted) = (
        SELECT refilled - CASE WHEN refilled >= 1 THEN 1 ELSE 0 END, moment, refilled >= 1
        FROM (
            SELECT least(:capacity, b.tokens + greatest(0, extract(epoch FROM moment - b.stamp)) * :rate) AS refilled,
                   moment
            FROM (SELECT coalesce(CAST(:at AS timestamptz), now()) AS moment) AS clock
        ) AS refill
    )
    RETURNING granted, tokens
    """
).execution_options(**UNSCOPED)


# A bucket untouched for a minute has refilled to its capacity (every limiter's capacity is its calls per minute, so
# it refills in 60 s): forgetting it changes no answer, since a new key starts full. Under READ COMMITTED a take that
# touched the row meanwhile makes the DELETE re-check its stamp, so a bucket in use is never dropped.
PURGE_FULL = text(
    """
    DELETE FROM rate_bucket WHERE stamp < coalesce(CAST(:at AS timestamptz), now()) - interval '60 seconds'
    """
).execution_options(**UNSCOPED)


class RateBucketRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def take(self, key: str, capacity: float, rate: float, at: datetime | None) -> tuple[bool, float]:
        """Whether a call was taken from `key`'s bucket (`rate` tokens a second, at most `capacity`), and the tokens
        left. `at`: the moment of the take, None for the database's clock (the one every worker and replica shares)."""
        params = {"key": key, "capacity": capacity, "rate": rate, "at": at}
        row = (await execute_core(self.session, TAKE, params)).one()
        return bool(row.granted), float(row.tokens)

    async def purge_full(self, at: datetime | None) -> int:
        """Delete every bucket that has refilled to its capacity by `at` (None: the database's clock); the count."""
        result = await execute_core(self.session, PURGE_FULL, {"at": at})
        return int(result.rowcount)  # type: ignore[attr-defined]
