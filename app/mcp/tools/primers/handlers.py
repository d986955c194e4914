"""memory_primers handlers: list, delete."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.mcp.calls import CallContext, ToolAnswer
from app.mcp.confirm import ConfirmFlow, Preview
from app.mcp.envelope import Meta, collection, single
from app.mcp.tools.common import uuid_arg
from app.mcp.tools.primers.args import DeleteArgs, ListArgs
from app.services.primers.operations import primer_page
from app.services.primers.service import PrimerService


async def list_primers(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    rows, total = await primer_page(ctx.app)  # `filtered_out` is what the cap left out
    return ToolAnswer(collection(Meta("list"), rows, total=total))


# ---------------------------------------------------------------- delete (preview → confirm)

PrimerState = tuple[uuid.UUID, dict[str, Any] | None]


async def _primer_id(args: DeleteArgs, ctx: CallContext) -> uuid.UUID:
    return uuid_arg(args.primer_id, "primer_id")


async def _load_primer(args: DeleteArgs, ctx: CallContext, session: AsyncSession, primer_id: uuid.UUID) -> PrimerState:
    return primer_id, await PrimerService(session).get_to_delete(primer_id)


def _missing(primer_id: uuid.UUID) -> ToolAnswer:
    return ToolAnswer(single(Meta("delete"), {"status": "not_found", "primer_id": str(primer_id)}))


async def _plan_delete(
    args: DeleteArgs, ctx: CallContext, session: AsyncSession, state: PrimerState
) -> Preview | ToolAnswer:
    primer_id, primer = state
    if primer is None:
        return _missing(primer_id)
    consequence = f"Removes primer {primer_id} from the always-at-hand set; thought {primer['thought_id']} stays."
    item = {"status": "preview", "primer_id": str(primer_id), "primer": primer}
    return Preview(Meta("delete"), item, consequence=consequence, confirm_with=f"primer_id={primer_id}")


async def _delete(args: DeleteArgs, ctx: CallContext, session: AsyncSession, state: PrimerState) -> ToolAnswer:
    primer_id, primer = state
    if primer is None or not await PrimerService(session).delete(primer_id, ctx.principal, primer):
        return _missing(primer_id)
    return ToolAnswer(single(Meta("delete"), {"status": "deleted", "primer_id": str(primer_id)}))


delete_primer = ConfirmFlow(
    prepare=_primer_id,
    load=_load_primer,
    plan=_plan_delete,
    execute=_delete,
    in_item=("consequence", "preview_token", "instruction"),
    in_meta={"consequence": "consequence", "instruction": "instruction"},
)
