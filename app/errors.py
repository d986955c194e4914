"""Domain errors: services raise AppError; the tool boundary maps it to the wire envelope."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


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
    """A classified failure: its message is safe to show a client.

    A refusal of one argument carries it as data beside the message (which stays the contract's text): `argument`,
    the argument as the message names it (a nested value by its path: `tags.3`, `thoughts[2].content`); `reason`,
    what is wrong with the value, without the call or the argument's name; `validation`, pydantic's error detail
    (`type`, `loc`, `ctx`) when the action's model refused it. A form reads them to say the refusal beside its
    field (app/http/ui/forms.py) instead of parsing the message. The wire answer never carries them.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        argument: str | None = None,
        reason: str | None = None,
        validation: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.argument = argument
        self.reason = reason
        self.validation = validation

    @property
    def status_code(self) -> int:
        return self.kind.status

    @property
    def retryable(self) -> bool:
        return self.kind is ErrorKind.unavailable


def bad_request(
    message: str,
    *,
    argument: str | None = None,
    reason: str | None = None,
    validation: Mapping[str, Any] | None = None,
) -> AppError:
    return AppError(ErrorKind.bad_request, message, argument=argument, reason=reason, validation=validation)


def invalid(argument: str, reason: str) -> AppError:
    """A service rule's refusal of one argument's value, in the contract's form `Invalid '<argument>': <reason>`."""
    return bad_request(f"Invalid '{argument}': {reason}", argument=argument, reason=reason)


def forbidden(message: str) -> AppError:
    return AppError(ErrorKind.forbidden, message)


def not_found(message: str, *, argument: str | None = None, reason: str | None = None) -> AppError:
    return AppError(ErrorKind.not_found, message, argument=argument, reason=reason)


def conflict(message: str) -> AppError:
    return AppError(ErrorKind.conflict, message)


def unavailable(message: str) -> AppError:
    return AppError(ErrorKind.unavailable, message)
