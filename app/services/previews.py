"""The one preview → confirm mechanism behind every destructive action."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.records import Principal
from app.db.repositories.previews import PreviewRepository
from app.errors import AppError, ErrorKind, bad_request

# Arguments that steer the two-step flow itself, not what is being written.
_FLOW_ARGUMENTS = frozenset({"confirm", "preview_token", "action"})


def fingerprint(arguments: dict[str, Any]) -> str:
    """A stable digest of the previewed arguments (flow arguments excluded)."""
    relevant = {key: value for key, value in arguments.items() if key not in _FLOW_ARGUMENTS and value is not None}
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def confirm_hint(tool: str, action: str) -> str:
    return f"call {tool} action={action} with the same arguments and no confirm to preview it and get a fresh token"


class PreviewService:
    def __init__(self, session: AsyncSession, ttl_seconds: int) -> None:
        self.previews = PreviewRepository(session)
        self.ttl = ttl_seconds

    async def issue(self, principal: Principal, tool: str, action: str, arguments: dict[str, Any]) -> str:
        token = await self.previews.insert(principal.user_id, tool, action, fingerprint(arguments), self.ttl)
        return str(token)

    async def redeem(
        self, principal: Principal, tool: str, action: str, arguments: dict[str, Any], token: str | None
    ) -> None:
        """Spend a token for this exact call, or refuse saying why (nothing is written then)."""
        hint = confirm_hint(tool, action)
        if not token:
            raise bad_request(f"preview_token is required with confirm: true — {hint}")
        try:
            token_id = uuid.UUID(token.strip())
        except (ValueError, AttributeError):
            raise bad_request(f"preview_token {token!r} is not a preview token — {hint}") from None
        row = await self.previews.lock(token_id)
        if row is None:
            raise bad_request(f"preview_token {token} is unknown — {hint}")
        if row.user_id != principal.user_id:
            raise bad_request(f"preview_token {token} was issued to another user — {hint}")
        if (row.tool, row.action) != (tool, action):
            raise bad_request(
                f"preview_token {token} was issued for {row.tool} action={row.action}, "
                f"not {tool} action={action} — {hint}"
            )
        if row.used_at is not None:
            raise AppError(ErrorKind.conflict, f"preview_token {token} was already used — {hint}")
        if row.expires_at <= row.now:
            raise AppError(ErrorKind.conflict, f"preview_token {token} has expired — {hint}")
        if row.fingerprint != fingerprint(arguments):
            raise bad_request(f"preview_token {token} was issued for other arguments — {hint}")
        await self.previews.mark_used(token_id)
