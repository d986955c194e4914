"""Tool and action specs, the flat input schema built from the per-action models, and dispatch.

Dispatch is the tool boundary: the only place that catches broad exceptions. It also runs the one
preview → confirm protocol of every destructive action (`ConfirmFlow`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mcp_types import CallToolResult, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.db.engine import is_unavailable
from app.db.models import Role
from app.db.records import Principal
from app.db.visibility import ROLE_RANK, Caller, acting_as
from app.errors import AppError, bad_request, conflict, forbidden, unavailable
from app.mcp import wire
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.observability import new_request_id, observe_call
from app.services.context import AppContext
from app.services.membership import role_refusal
from app.services.previews import PreviewService

logger = logging.getLogger(__name__)

INT64_LIMIT = 2**63


class ArgumentModel(BaseModel):
    """Base of every input model, an action's and a nested object's (a link, a bulk_create row, a summary): unknown
    keys are refused by name; types are strict, as JSON spells them (`"10"` or `true` is not a number, `"true"` or
    `1` not a boolean: a client that sends them has a bug the answer should show, not hide); and so are numbers
    nothing downstream can hold (NaN, ±infinity, integers beyond PostgreSQL's 64-bit bigint). Enum arguments take
    their values' strings (`app.mcp.tools.common.EdgeTypeArg`)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=False, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _fits_in_64_bits(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and not -INT64_LIMIT <= value < INT64_LIMIT:
            raise ValueError("integer out of range (it must fit in 64 bits)")
        return value


class ActionArgs(ArgumentModel):
    """Base of every per-action input model."""


@dataclass(frozen=True)
class ToolAnswer:
    payload: Any
    raw_text: str | None = None


@dataclass(frozen=True)
class CallContext:
    app: AppContext
    principal: Principal
    tool: str
    action: str = ""


Handler = Callable[[Any, CallContext], Awaitable[ToolAnswer]]


# ---------------------------------------------------------------- preview → confirm


@dataclass
class Preview:
    """A destructive action's plan, answered instead of executing it: a single `item` or a collection of
    `items`. The flow adds what confirming needs — the token, the consequence, the instruction — where its
    action's answer carries them, and `meta.preview`."""

    meta: Meta
    item: dict[str, Any] | None = None
    items: list[Any] | None = None
    consequence: str | None = None
    # the confirm call's arguments as the instruction words them ("edge_id=…"); None: the answer has none
    confirm_with: str | None = None
    purpose: str = "proceed"


State = Any
Prepare = Callable[[Any, CallContext], Awaitable[State]]
Load = Callable[[Any, CallContext, AsyncSession, State], Awaitable[State]]
Plan = Callable[[Any, CallContext, Any, State], Awaitable[Preview | ToolAnswer]]
Execute = Callable[[Any, CallContext, AsyncSession, State], Awaitable[ToolAnswer]]


async def _no_preparation(args: Any, ctx: CallContext) -> State:
    return None


def previewed_arguments(args: ActionArgs, state: State = None) -> dict[str, Any]:
    """What a preview token is bound to: the call's arguments minus the flow arguments."""
    return args.model_dump(exclude={"confirm", "preview_token"}, exclude_none=True)


@dataclass(frozen=True)
class ConfirmFlow:
    """The preview → confirm protocol of a destructive action, run by `dispatch`.

    `prepare` runs before the transaction (parse ids, check texts, embed) and its result — the state —
    reaches every later step. In one transaction: `load` (reads that come first either way), then with
    `confirm: true` the token is redeemed — bound to the user, tool, action and `bind`'s arguments; a
    refused token raises and nothing is written — and `execute` runs; otherwise `plan` answers a
    `Preview` (or a plain answer, such as not_found, which issues no token) and the token is issued.
    A tokenless flow executes on `confirm: true` alone; without `preview_reads` its plan runs outside
    any transaction. `in_item` names what the single preview item ends with, in order (`consequence`,
    `preview_token`, `instruction`); `in_meta` maps meta.preview's keys beside token and destructive to
    those texts.
    """

    plan: Plan
    execute: Execute
    prepare: Prepare = _no_preparation
    load: Load | None = None
    token: bool = True
    bind: Callable[[Any, State], dict[str, Any]] = previewed_arguments
    in_item: tuple[str, ...] = ("preview_token",)
    in_meta: Mapping[str, str] = field(default_factory=dict)
    preview_reads: bool = True


def confirm_instruction(tool: str, action: str, arguments: str, token: str | None, purpose: str = "proceed") -> str:
    with_token = f", preview_token={token}" if token else ""
    return f"Call {tool} again with action={action}, {arguments}, confirm=true{with_token} to {purpose}."


async def run_confirm_flow(flow: ConfirmFlow, args: Any, ctx: CallContext) -> ToolAnswer:
    state = await flow.prepare(args, ctx)
    if not args.confirm and not flow.preview_reads:
        return _preview_answer(flow, ctx, await flow.plan(args, ctx, None, state), None)
    async with ctx.app.db.unit_of_work() as session:
        if flow.load is not None:
            state = await flow.load(args, ctx, session, state)
        previews = PreviewService(session, ctx.app.settings.previews.ttl_seconds)
        if args.confirm:
            if flow.token:
                bound = flow.bind(args, state)
                await previews.redeem(ctx.principal, ctx.tool, ctx.action, bound, args.preview_token)
            return await flow.execute(args, ctx, session, state)
        planned = await flow.plan(args, ctx, session, state)
        if isinstance(planned, ToolAnswer):
            return planned
        token = (
            await previews.issue(ctx.principal, ctx.tool, ctx.action, flow.bind(args, state)) if flow.token else None
        )
    return _preview_answer(flow, ctx, planned, token)


def _preview_answer(
    flow: ConfirmFlow, ctx: CallContext, planned: Preview | ToolAnswer, token: str | None
) -> ToolAnswer:
    if isinstance(planned, ToolAnswer):
        return planned
    texts: dict[str, Any] = {"preview_token": token, "consequence": planned.consequence}
    if planned.confirm_with is not None:
        texts["instruction"] = confirm_instruction(ctx.tool, ctx.action, planned.confirm_with, token, planned.purpose)
    extra = {key: texts[source] for key, source in flow.in_meta.items()}
    planned.meta.preview = preview_meta(token, **extra)
    if planned.items is not None:
        return ToolAnswer(collection(planned.meta, planned.items))
    item = {**(planned.item or {}), **{key: texts[key] for key in flow.in_item}}
    return ToolAnswer(single(planned.meta, item))


@dataclass(frozen=True)
class Action:
    """An action: its argument model, its role, and either a handler or — destructive — a `ConfirmFlow`."""

    name: str
    model: type[ActionArgs]
    handler: Handler | ConfirmFlow
    role: Role = Role.reader


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its actions, and the retired arguments it refuses with a migration text.

    Argument descriptions live on the argument models (`Field(description=…)`); the advertised input
    schema is derived from them by `build_input_schema`. Retired arguments are not advertised as
    properties: the description names their replacements and `dispatch` refuses them by name.
    """

    name: str
    description: str
    actions: tuple[Action, ...]
    annotations: ToolAnnotations
    # retired argument → migration text; `per_action` restricts a name to some actions only
    retired: dict[str, str] = field(default_factory=dict)
    retired_per_action: dict[str, dict[str, str]] = field(default_factory=dict)

    def action(self, name: str) -> Action | None:
        return next((action for action in self.actions if action.name == name), None)

    @property
    def has_actions(self) -> bool:
        return bool(self.actions) and self.actions[0].name != ""

    def mcp_tool(self) -> MCPTool:
        return MCPTool(
            name=self.name,
            description=self.description + _retired_clause(self),
            input_schema=build_input_schema(self),
            output_schema=wire.OUTPUT_SCHEMA,
            annotations=self.annotations,
        )


# ---------------------------------------------------------------- schema


def _retired_clause(spec: ToolSpec) -> str:
    """The retired arguments and their replacements, from the migration texts ("x was removed; use y")."""
    names: list[str] = []
    for name, text in spec.retired.items():
        names.append(_retired_entry(name, text))
    for action, retired in spec.retired_per_action.items():
        names += [f"{action} {_retired_entry(name, text)}" for name, text in retired.items()]
    return f" Retired: {', '.join(names)}." if names else ""


def _retired_entry(name: str, text: str) -> str:
    replacement = text.partition("; use ")[2].split(" (", 1)[0]
    return f"{name}→{replacement}" if replacement else f"{name} (no replacement)"


def _compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop titles, collapse Optional[X] to X and inline nothing else: agents read every byte."""
    schema = {key: value for key, value in schema.items() if key != "title"}
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        non_null = [option for option in any_of if option.get("type") != "null"]
        if len(non_null) == 1:
            schema.pop("anyOf")
            schema.update(non_null[0])
    # Size guards (ids ≤ 64, paths ≤ 4096, …) stay enforced by the models; advertising them costs
    # every agent context tokens and guides nothing.
    if schema.get("minLength") == 1:
        del schema["minLength"]
    if isinstance(schema.get("maxLength"), int) and schema["maxLength"] >= 64:
        del schema["maxLength"]
    if isinstance(schema.get("maxItems"), int) and schema["maxItems"] >= 100:
        del schema["maxItems"]
    schema.pop("pattern", None)  # the models check patterns and say what they expect
    if isinstance(schema.get("additionalProperties"), bool):
        del schema["additionalProperties"]  # the models refuse unknown keys by name
    if schema.get("type") == "boolean" and schema.get("default") is False:
        del schema["default"]  # absent is false
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _compact_schema(schema[key])
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {name: _compact_schema(value) for name, value in schema["properties"].items()}
    if "anyOf" in schema:
        schema["anyOf"] = [_compact_schema(option) for option in schema["anyOf"]]
    return schema


def _inline_refs(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[-1]]
        return _inline_refs({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions)
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, dict):
            result[key] = _inline_refs(value, definitions)
        elif isinstance(value, list):
            result[key] = [_inline_refs(v, definitions) if isinstance(v, dict) else v for v in value]
        else:
            result[key] = value
    return result


def _merged(variants: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One property for every action that takes the argument: the first action's schema with the loosest
    bounds any action accepts, and its description — or, where the actions describe it differently, each
    description prefixed by its actions. A default the actions do not share is left to the descriptions."""
    prop = dict(variants[0][1])
    for key, loosest in (("minimum", min), ("maximum", max), ("minItems", min), ("maxItems", max)):
        bounds = [variant[key] for _, variant in variants if key in variant]
        if len(bounds) < len(variants):
            prop.pop(key, None)  # an action takes it unbounded
        elif bounds:
            prop[key] = loosest(bounds)
    texts: dict[str, list[str]] = {}
    for action, variant in variants:
        text = variant.get("description")
        if text:
            texts.setdefault(text, []).append(action)
    if len(texts) == 1:
        prop["description"] = next(iter(texts))
    elif texts:
        prop["description"] = "; ".join(f"{'/'.join(actions)}: {text}" for text, actions in texts.items())
    if len({repr(variant.get("default")) for _, variant in variants}) > 1:
        prop.pop("default", None)
    return prop


def _flat(prop: dict[str, Any]) -> dict[str, Any]:
    """A nested object (or a list of them) whose description spells out its keys is advertised as just an
    object: the description says it once, and the model still checks every key."""
    if "description" not in prop:
        return prop
    if "properties" in prop:
        return {key: value for key, value in prop.items() if key not in ("properties", "required")}
    items = prop.get("items")
    if isinstance(items, dict) and "properties" in items:
        return {**prop, "items": {"type": "object"}}
    return prop


def build_input_schema(spec: ToolSpec) -> dict[str, Any]:
    """One flat object: `action` enum plus the union of every action's arguments, described by the models."""
    variants: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for action in spec.actions:
        raw = action.model.model_json_schema()
        definitions = raw.get("$defs", {})
        for name, prop in raw.get("properties", {}).items():
            if name != "action":
                prop = _flat(_compact_schema(_inline_refs(prop, definitions)))
                variants.setdefault(name, []).append((action.name, prop))
    properties: dict[str, Any] = {}
    if spec.has_actions:
        properties["action"] = {"type": "string", "enum": [action.name for action in spec.actions]}
    properties.update({name: _merged(found) for name, found in variants.items()})
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if spec.has_actions:
        schema["required"] = ["action"]
    return schema


# ---------------------------------------------------------------- validation


def _argument_error(spec: ToolSpec, action: Action, error: ValidationError) -> AppError:
    first = error.errors()[0]
    name = ".".join(str(part) for part in first["loc"]) or "arguments"
    call = f"{spec.name} action={action.name}" if spec.has_actions else spec.name
    accepted = ", ".join(key for key in action.model.model_fields if key != "action") or "no arguments"
    if first["type"] == "extra_forbidden":
        return bad_request(f"Unknown argument '{name}' for {call}; it accepts: {accepted}")
    if first["type"] == "missing":
        return bad_request(f"Missing required argument '{name}' for {call}")
    return bad_request(f"Invalid argument '{name}' for {call}: {first['msg']}")


def _resolve_action(spec: ToolSpec, arguments: dict[str, Any]) -> Action:
    if not spec.has_actions:
        return spec.actions[0]
    name = arguments.get("action")
    names = ", ".join(action.name for action in spec.actions)
    if not isinstance(name, str) or not name:
        raise bad_request(f"Missing required argument 'action' for {spec.name}; one of: {names}")
    action = spec.action(name)
    if action is None:
        raise bad_request(f"Invalid argument 'action' for {spec.name}: {name!r} is not one of: {names}")
    return action


def _refuse_retired(spec: ToolSpec, action: Action, arguments: dict[str, Any]) -> None:
    retired = {**spec.retired, **spec.retired_per_action.get(action.name, {})}
    for name in arguments:
        if name in retired:
            raise bad_request(retired[name])


def _refuse_nul(spec: ToolSpec, action: Action, value: Any, path: str = "") -> None:
    """PostgreSQL text cannot hold U+0000: refuse it by argument instead of failing in the driver."""
    if isinstance(value, str):
        if "\x00" in value:
            call = f"{spec.name} action={action.name}" if spec.has_actions else spec.name
            raise bad_request(f"Invalid argument '{path}' for {call}: text must not contain NUL (U+0000)")
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


def _classify(error: Exception, call: str = "this call") -> AppError | None:
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


async def _dispatch(
    spec: ToolSpec, arguments: dict[str, Any], app: AppContext, principal: Principal, request_id: str, commits: _Commits
) -> CallToolResult:
    try:
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
        with acting_as(Caller(principal, _call_label(spec, action), action.role)):
            if isinstance(action.handler, ConfirmFlow):
                answer = await run_confirm_flow(action.handler, args, ctx)
            else:
                answer = await action.handler(args, ctx)
        return wire.success(answer.payload, answer.raw_text)
    except Exception as error:
        # After a commit, a driver or value error is no refusal ("nothing was written", "invalid arguments"): the
        # call's changes are saved, and the answer says so.
        classified = (
            None if commits.seen and not isinstance(error, AppError) else _classify(error, _call_name(spec, arguments))
        )
        if classified is not None:
            if classified is not error:
                logger.warning("tool %s: %s (%s: %s)", spec.name, classified.message, type(error).__name__, error)
            return wire.classified_error(classified)
        logger.exception("tool %s failed unexpectedly (ref %s; committed: %s)", spec.name, request_id, commits.seen)
        return wire.unclassified_error(internal_error_text(spec.name, request_id, commits.seen))
