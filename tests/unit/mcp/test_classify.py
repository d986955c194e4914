"""The tool boundary's error classification (no database needed)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from app.mcp.classify import classify


class FakeDriverError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__("driver text that must not reach a client")
        self.sqlstate = sqlstate


def driver_error(sqlstate: str) -> DBAPIError:
    return DBAPIError("SELECT 1", {}, FakeDriverError(sqlstate))


def test_a_deadlock_or_serialization_failure_is_a_retryable_503() -> None:
    for sqlstate in ("40P01", "40001"):
        error = classify(driver_error(sqlstate))
        assert error is not None
        assert (error.status_code, error.retryable) == (503, True)
        assert error.message == "The call collided with a concurrent one and was rolled back; retry it"


def test_a_value_the_database_cannot_hold_is_a_400_without_driver_text() -> None:
    error = classify(driver_error("22003"), "memory_recall action=list")
    assert error is not None and error.status_code == 400
    assert "driver text" not in error.message


def test_anything_else_stays_unclassified() -> None:
    assert classify(RuntimeError("boom")) is None
    assert classify(driver_error("42601")) is None


def test_a_foreign_key_violation_is_a_409_naming_the_call() -> None:
    """The services check every reference first, so only a concurrent delete gets this far."""
    error = classify(driver_error("23503"), "memory_store action=link")
    assert error is not None
    assert (error.status_code, error.retryable) == (409, False)
    assert error.message == (
        "memory_store action=link refers to a thought or project that a concurrent call deleted; nothing was "
        "written. Read the ids again before retrying"
    )
