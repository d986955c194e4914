"""Dispatch, the tool boundary: the only place that catches broad exceptions. Resolves the action, checks the role
and the rate limit, refuses retired arguments and NUL, validates, runs the handler or its confirm flow
(app.mcp.confirm) as the caller, and turns every failure into an envelope (app.mcp.classify).

`call_typed` and `run_typed` are the same boundary for the console (app/http/ui/tool_calls.py): the same checks,
validation, confirm flows, metric and classification, but what the handler (or the given runner, an operation) built
comes back typed and a failure is raised (`AppError`, or `ToolFailure` for an unexpected one), never an envelope to
decode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp_types import CallToolResult
from pydantic import ValidationError
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from app.errors import AppError, bad_request, forbidden, unavailable
from app.mcp import wire
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.classify import classify
from app.mcp.confirm import ConfirmFlow, run_confirm_flow
from app.mcp.registry import Action, ToolSpec
from app.observability import new_request_id, observe_call
from app.services.actors import Actor, retried_on_primary
from app.services.admin.membership import role_refusal
from app.services.context import AppContext
from app.services.values import ROLE_RANK, Principal

logger = logging.getLogger(__name__)


def _argument_error(spec: ToolSpec, action: Action, error: ValidationError) -> AppError:
    first = error.errors()[0]
    name = ".".join(str(part) for part in first["loc"]) or "arguments"
    call = f"{spec.name} action={action.name}" if spec.has_actions else spec.name
    accepted = ", ".join(key for key in action.model.model_fields if key != "action") or "no arguments"
    # The argument and pydantic's detail go beside the text as data, taken from the error itself (AppError).
    argument = name if first["loc"] else None
    if first["type"] == "extra_forbidden":
        message = f"Unknown argument '{name}' for {call}; it accepts: {accepted}"
        return bad_request(message, argument=argument, validation=first)
    if first["type"] == "missing":
        return bad_request(f"Missing required argument '{name}' for {call}", argument=argument, validation=first)
    message = f"Invalid argument '{name}' for {call}: {first['msg']}"
    return bad_request(message, argument=argument, reason=first["msg"], validation=first)


def _resolve_action(spec: ToolSpec, arguments: dict[str, Any]) -> Action:
    if not spec.has_actions:
        return spec.actions[0]
    name = arguments.get("action")
    names = ", ".join(action.name for action in spec.actions)
    if not isinstance(name, str) or not name:
        raise bad_request(f"Missing required argument 'action' for {spec.name}; one of: {names}", argument="action")
    action = spec.action(name)
    if action is None:
        reason = f"{name!r} is not one of: {names}"
        raise bad_request(f"Invalid argument 'action' for {spec.name}: {reason}", argument="action", reason=reason)
    return action


def _refuse_retired(spec: ToolSpec, action: Action, arguments: dict[str, Any]) -> None:
    retired = {**spec.retired, **spec.retired_per_action.get(action.name, {})}
    for name in arguments:
        if name in retired:
            raise bad_request(retired[name], argument=name)


def _refuse_nul(spec: ToolSpec, action: Action, value: Any, path: str = "") -> None:
    """PostgreSQL text cannot hold U+0000: refuse it by argument instead of failing in the driver."""
    if isinstance(value, str):
        if "\x00" in value:
            call = f"{spec.name} action={action.name}" if spec.has_actions else spec.name
            reason = "text must not contain NUL (U+0000)"
            raise bad_request(f"Invalid argument '{path}' for {call}: {reason}", argument=path, reason=reason)
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_nul(spec, action, item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_nul(spec, action, item, f"{path}.{index}")


def _call_label(spec: ToolSpec, action: Action) -> str:
    return f"{spec.name} action={action.name}" if spec.has_actions else spec.name


def _authorize(principal: Principal, spec: ToolSpec, action: Action) -> None:
    if ROLE_RANK[principal.role] < ROLE_RANK[action.role]:
        raise forbidden(role_refusal(_call_label(spec, action), action.role, principal.name, principal.role))


@dataclass
class _Commits:
    """Whether a transaction of the running call that wrote has committed: a failure after that (shaping the
    answer, say) must not claim that the call was rolled back, nor that it was refused. `writing`: the open
    transaction has sent a write. Kept here, not on the connection: an invalidated connection (a lost database)
    cannot be asked for its info without raising."""

    seen: bool = False
    writing: bool = False


_CALL_COMMITS: ContextVar[_Commits | None] = ContextVar("call_commits", default=None)
_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "MERGE")


@event.listens_for(Engine, "begin")
@event.listens_for(Engine, "rollback")
def _transaction_ends(connection: Connection) -> None:
    commits = _CALL_COMMITS.get()
    if commits is not None:
        commits.writing = False


@event.listens_for(Engine, "before_cursor_execute")
def _note_a_write(
    connection: Connection, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    commits = _CALL_COMMITS.get()
    if commits is None or commits.writing:
        return  # not a tool call (jobs, the CLI), or already known to write
    dml = context is not None and (context.isinsert or context.isupdate or context.isdelete)
    if dml or statement.lstrip()[:6].upper().startswith(_WRITE_VERBS):  # text() statements carry no flags
        commits.writing = True


@event.listens_for(Session, "after_commit")
def _note_commit(session: Session) -> None:
    """After the database confirmed the commit (a commit that fails never gets here); a savepoint's release
    fires it too, and commits nothing yet."""
    commits = _CALL_COMMITS.get()
    if commits is not None and commits.writing and not session.in_nested_transaction():
        commits.seen, commits.writing = True, False


def internal_error_text(tool: str, request_id: str, committed: bool) -> str:
    """The generic text of an unexpected failure: the contract's, unless the call had already committed."""
    if committed:
        return (
            f"Internal error in {tool} (ref {request_id}) after the call's transaction was committed: what it "
            "changed is saved. Read it back before retrying"
        )
    return f"Internal error in {tool} (ref {request_id}); the call was rolled back"


Result = TypeVar("Result")


class ToolFailure(Exception):
    """An unexpected failure of a typed call (`run_typed`): the generic text dispatch would answer, status 500."""

    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def dispatch(spec: ToolSpec, arguments: dict[str, Any], app: AppContext, principal: Principal) -> CallToolResult:
    """Validate, authorise, run; every failure becomes an envelope. Each call gets a request id (in `_meta`)."""
    request_id = new_request_id()
    started = time.perf_counter()
    commits = _Commits()
    reset = _CALL_COMMITS.set(commits)
    try:
        result = await _dispatch(spec, arguments, app, principal, request_id, commits)
    finally:
        _CALL_COMMITS.reset(reset)
    result.meta = {**(result.meta or {}), "requestId": request_id}
    observe_call(spec.name, _action_label(spec, arguments), _outcome(result), started)
    return result


def _call_name(spec: ToolSpec, arguments: dict[str, Any]) -> str:
    action = arguments.get("action") if isinstance(arguments, dict) else None
    return f"{spec.name} action={action}" if spec.has_actions and isinstance(action, str) else spec.name


def _action_label(spec: ToolSpec, arguments: dict[str, Any]) -> str:
    """The metric label: a known action name only — never client text (content, unbounded label sets)."""
    if not spec.has_actions:
        return ""
    name = arguments.get("action") if isinstance(arguments, dict) else None
    if not isinstance(name, str) or not name:
        return ""
    return name if spec.action(name) is not None else "unknown"


def _outcome(result: CallToolResult) -> str:
    if not result.is_error:
        return "ok"
    error = (result.structured_content or {}).get("result", {}).get("error", {})
    return str(error.get("statusCode", 500))


async def _rate_limit(app: AppContext, principal: Principal) -> None:
    if app.rate_limiter is None:
        return
    wait = await app.rate_limiter.retry_after(str(principal.token_id or principal.user_id or principal.name))
    if wait is not None:
        raise unavailable(
            f"Rate limit exceeded for this token ({app.rate_limiter.per_minute} calls/minute); retry in {wait:.1f}s"
        )


async def _run_handler(action: Action, args: Any, ctx: CallContext) -> ToolAnswer:
    if isinstance(action.handler, ConfirmFlow):
        return await run_confirm_flow(action.handler, args, ctx)
    return await action.handler(args, ctx)


async def _dispatch(
    spec: ToolSpec,
    arguments: dict[str, Any],
    app: AppContext,
    principal: Principal,
    request_id: str,
    commits: _Commits,
) -> CallToolResult:
    try:
        answer = await _checked_run(spec, arguments, app, principal, commits, _run_handler)
        return wire.success(answer.payload, answer.raw_text)
    except Exception as error:
        failure = _failure(spec, arguments, request_id, commits, error)
        if isinstance(failure, AppError):
            return wire.classified_error(failure)
        return wire.unclassified_error(failure.message)


async def _checked_run(
    spec: ToolSpec,
    arguments: dict[str, Any],
    app: AppContext,
    principal: Principal,
    commits: _Commits,
    run: Callable[[Action, Any, CallContext], Awaitable[Result]],
) -> Result:
    action = _resolve_action(spec, arguments)
    _authorize(principal, spec, action)
    await _rate_limit(app, principal)
    _refuse_retired(spec, action, arguments)
    _refuse_nul(spec, action, arguments)
    try:
        args = action.model.model_validate(arguments)
    except ValidationError as error:
        raise _argument_error(spec, action, error) from None
    ctx = CallContext(app=app, principal=principal, tool=spec.name, action=action.name)
    # Every unit of work of the call sees only the caller's projects (app.db.visibility).
    with Actor(principal, "mcp").acting(_call_label(spec, action), action.role):
        # A read lost on a replica runs again on the primary, unless something of the call committed.
        return await retried_on_primary(lambda: run(action, args, ctx), lambda: not commits.seen)


def _failure(
    spec: ToolSpec, arguments: dict[str, Any], request_id: str, commits: _Commits, error: Exception
) -> AppError | ToolFailure:
    """A failed call's refusal: the classified `AppError`, else (logged) the generic internal error."""
    # After a commit, a driver or value error is no refusal ("nothing was written", "invalid arguments"): the
    # call's changes are saved, and the answer says so.
    classified = (
        None if commits.seen and not isinstance(error, AppError) else classify(error, _call_name(spec, arguments))
    )
    if classified is not None:
        if classified is not error:
            logger.warning("tool %s: %s (%s: %s)", spec.name, classified.message, type(error).__name__, error)
        return classified
    logger.exception("tool %s failed unexpectedly (ref %s; committed: %s)", spec.name, request_id, commits.seen)
    return ToolFailure(internal_error_text(spec.name, request_id, commits.seen))


async def call_typed(spec: ToolSpec, arguments: dict[str, Any], app: AppContext, principal: Principal) -> ToolAnswer:
    """The tool boundary for a caller that renders the answer itself (the console): `dispatch`'s checks, validation
    and run — the action's handler or its confirm flow — with its metric; answers the `ToolAnswer` the handler
    built (never an envelope to decode) and raises the refusal (`AppError`) or `ToolFailure`."""
    return await _typed(spec, arguments, app, principal, _run_handler)


async def run_typed(
    spec: ToolSpec,
    arguments: dict[str, Any],
    app: AppContext,
    principal: Principal,
    run: Callable[[Any, CallContext], Awaitable[Result]],
) -> Result:
    """As `call_typed`, running `run` — an operation, say — on the validated arguments: its typed result."""
    return await _typed(spec, arguments, app, principal, lambda action, args, ctx: run(args, ctx))


async def _typed(
    spec: ToolSpec,
    arguments: dict[str, Any],
    app: AppContext,
    principal: Principal,
    run: Callable[[Action, Any, CallContext], Awaitable[Result]],
) -> Result:
    request_id = new_request_id()
    started = time.perf_counter()
    commits = _Commits()
    reset = _CALL_COMMITS.set(commits)
    outcome = "ok"
    try:
        return await _checked_run(spec, arguments, app, principal, commits, run)
    except Exception as error:
        failure = _failure(spec, arguments, request_id, commits, error)
        outcome = str(failure.status_code)
        if failure is error:
            raise
        raise failure from error
    finally:
        _CALL_COMMITS.reset(reset)
        observe_call(spec.name, _action_label(spec, arguments), outcome, started)
