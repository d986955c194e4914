"""Error classification at the tool boundary: which driver and Python failures are the caller's (an AppError with
its text: a retry, a concurrent delete, a value out of range) and which are internal (None)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from app.db.engine import is_unavailable
from app.errors import AppError, bad_request, conflict, unavailable

# SQLSTATEs that a caller's value causes: class 22 data exception (a number or date out of range), class 54
# program limit exceeded (a text too large for an index row or a tsvector), 23502/23514 a NULL or a value a
# CHECK constraint refuses (e.g. a text over the content limit).
_INPUT_SQLSTATES = ("22", "54", "23502", "23514")


# Deadlock detected / serialization failure: nothing was written, the same call can simply run again.
CONCURRENCY_SQLSTATES = frozenset({"40P01", "40001"})
FOREIGN_KEY_VIOLATION = "23503"


def _sqlstate(error: Exception) -> str | None:
    sqlstate = getattr(error.orig, "sqlstate", None) if isinstance(error, DBAPIError) else None
    return sqlstate if isinstance(sqlstate, str) else None


def _caused_by_a_value(error: Exception) -> bool:
    """A value the model let through that Python or PostgreSQL cannot hold (the safety net behind the models)."""
    if isinstance(error, OverflowError):
        return True
    sqlstate = _sqlstate(error)
    return sqlstate is not None and sqlstate.startswith(_INPUT_SQLSTATES)


def classify(error: Exception, call: str = "this call") -> AppError | None:
    if isinstance(error, AppError):
        return error
    if _sqlstate(error) in CONCURRENCY_SQLSTATES:
        return unavailable("The call collided with a concurrent one and was rolled back; retry it")
    if is_unavailable(error):
        return unavailable("Database unavailable; retry shortly")
    if _sqlstate(error) == FOREIGN_KEY_VIOLATION:  # the services check references first: a concurrent delete
        return conflict(
            f"{call} refers to a thought or project that a concurrent call deleted; nothing was written. "
            "Read the ids again before retrying"
        )
    if _caused_by_a_value(error):
        return bad_request(
            f"Invalid arguments for {call}: a value is out of the range that can be stored "
            "(check numbers, dates and the length of texts)"
        )
    return None
