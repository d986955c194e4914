"""The one preview → confirm protocol of every destructive action (`ConfirmFlow`), run by dispatch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from sqlalchemy.ext.asyncio import AsyncSession

from app.mcp.arguments import ActionArgs
from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.services.previews import PreviewService


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


# What `prepare` answers, and what `load` makes of it (the same, without a `load`): the state every later step gets.
Prepared = TypeVar("Prepared")
State = TypeVar("State")


def previewed_arguments(args: ActionArgs, state: object = None) -> dict[str, Any]:
    """What a preview token is bound to: the call's arguments minus the flow arguments."""
    return args.model_dump(exclude={"confirm", "preview_token"}, exclude_none=True)


@dataclass(frozen=True)
class ConfirmFlow(Generic[Prepared, State]):
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

    prepare: Callable[[Any, CallContext], Awaitable[Prepared]]
    # the session is None where the plan runs outside a transaction (`preview_reads=False`)
    plan: Callable[[Any, CallContext, Any, State], Awaitable[Preview | ToolAnswer]]
    execute: Callable[[Any, CallContext, AsyncSession, State], Awaitable[ToolAnswer]]
    load: Callable[[Any, CallContext, AsyncSession, Prepared], Awaitable[State]] | None = None
    token: bool = True
    bind: Callable[[Any, State], dict[str, Any]] = previewed_arguments
    in_item: tuple[str, ...] = ("preview_token",)
    in_meta: Mapping[str, str] = field(default_factory=dict)
    preview_reads: bool = True


def confirm_instruction(tool: str, action: str, arguments: str, token: str | None, purpose: str = "proceed") -> str:
    with_token = f", preview_token={token}" if token else ""
    return f"Call {tool} again with action={action}, {arguments}, confirm=true{with_token} to {purpose}."


async def run_confirm_flow(flow: ConfirmFlow[Prepared, State], args: Any, ctx: CallContext) -> ToolAnswer:
    prepared = await flow.prepare(args, ctx)
    # without a `load`, the prepared value is the state (Prepared is State: a flow's types cannot say so)
    state = cast(State, prepared)
    if not args.confirm and not flow.preview_reads:
        return _preview_answer(flow, ctx, await flow.plan(args, ctx, None, state), None)
    async with ctx.app.db.unit_of_work() as session:
        if flow.load is not None:
            state = await flow.load(args, ctx, session, prepared)
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
    flow: ConfirmFlow[Any, Any], ctx: CallContext, planned: Preview | ToolAnswer, token: str | None
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
