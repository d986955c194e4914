"""memory_primers handlers: list, delete."""

from __future__ import annotations

from app.db.repositories.audit import AuditRepository
from app.mcp.envelope import Meta, collection, preview_meta, single
from app.mcp.registry import CallContext, ToolAnswer
from app.mcp.tools.common import (
    previewed_arguments,
    uuid_arg,
)
from app.mcp.tools.primers.args import TOOL, DeleteArgs, ListArgs
from app.services.previews import PreviewService
from app.services.primers import PrimerService


async def list_primers(args: ListArgs, ctx: CallContext) -> ToolAnswer:
    async with ctx.app.db.unit_of_work() as session:
        service = PrimerService(session)
        rows = await service.list(ctx.app.limits.primer_list_cap)
        # the cap is a page: `total` is every primer, `filtered_out` what the cap left out
        total = await service.count() if len(rows) >= ctx.app.limits.primer_list_cap else len(rows)
    return ToolAnswer(collection(Meta("list"), rows, total=total))


async def delete_primer(args: DeleteArgs, ctx: CallContext) -> ToolAnswer:
    primer_id = uuid_arg(args.primer_id, "primer_id")
    missing = {"status": "not_found", "primer_id": str(primer_id)}
    async with ctx.app.db.unit_of_work() as session:
        service = PrimerService(session)
        previews = PreviewService(session, ctx.app.limits.preview_ttl_seconds)
        primer = await service.get(primer_id)
        if args.confirm:
            await previews.redeem(ctx.principal, TOOL, "delete", previewed_arguments(args), args.preview_token)
            if primer is None or not await service.delete(primer_id):
                return ToolAnswer(single(Meta("delete"), missing))
            await AuditRepository(session).record(ctx.principal.user_id, TOOL, "delete", [primer_id], None, primer)
            return ToolAnswer(single(Meta("delete"), {"status": "deleted", "primer_id": str(primer_id)}))
        if primer is None:
            return ToolAnswer(single(Meta("delete"), missing))
        token = await previews.issue(ctx.principal, TOOL, "delete", previewed_arguments(args))
    consequence = f"Removes primer {primer_id} from the always-at-hand set; thought {primer['thought_id']} stays."
    instruction = (
        f"Call memory_primers again with action=delete, primer_id={primer_id}, confirm=true, "
        f"preview_token={token} to proceed."
    )
    item = {
        "status": "preview",
        "primer_id": str(primer_id),
        "primer": primer,
        "consequence": consequence,
        "preview_token": token,
        "instruction": instruction,
    }
    return ToolAnswer(single(Meta("delete", preview=preview_meta(token, consequence, instruction)), item))
