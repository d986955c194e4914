"""Domain errors: services raise AppError; the tool boundary maps it to the wire envelope."""

from __future__ import annotations

from enum import Enum


class ErrorKind(Enum):
    bad_request = 400
    unauthorized = 401
    forbidden = 403
    not_found = 404
    conflict = 409
    unavailable = 503

    @property
    def status(self) -> int:
        return self.value


class AppError(Exception):
    """A classified failure: its message is safe to show a client."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def status_code(self) -> int:
        return self.kind.status

    @property
    def retryable(self) -> bool:
        return self.kind is ErrorKind.unavailable


def bad_request(message: str) -> AppError:
    return AppError(ErrorKind.bad_request, message)


def forbidden(message: str) -> AppError:
    return AppError(ErrorKind.forbidden, message)


def not_found(message: str) -> AppError:
    return AppError(ErrorKind.not_found, message)


def conflict(message: str) -> AppError:
    return AppError(ErrorKind.conflict, message)


def unavailable(message: str) -> AppError:
    return AppError(ErrorKind.unavailable, message)
