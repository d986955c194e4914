"""Who makes an administrative change and through which door: the one audit event every door writes for it.

The console, the CLI and the REST routes call the same operations (`app/services/<area>/operations.py`); each passes
an `Actor`, which the operation uses to run its role check, to run its unit of work as the actor (per-project
membership, app.db.visibility) and to write its audit event: the same action and details from every door, the
door in the event's `tool` and the actor in its `user_id` (none for the operator on the server host).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Role
from app.db.records import Principal
from app.db.replicas import retried_on_primary
from app.db.repositories.audit import AuditRepository
from app.db.visibility import Caller, acting_as
from app.errors import forbidden
from app.services.admin.membership import role_refusal

CONSOLE = "console"
CLI = "cli"
API = "api"


@dataclass(frozen=True)
class Actor:
    principal: Principal | None  # None: the operator on the server host (the CLI), who sees and may change everything
    door: str  # the audit event's tool: `console`, `cli` or `api`

    @classmethod
    def operator(cls) -> Actor:
        """`synaptomind …` on the server host: the way back in, held to no role and no project's membership."""
        return cls(None, CLI)

    @classmethod
    def console(cls, principal: Principal) -> Actor:
        return cls(principal, CONSOLE)

    @property
    def name(self) -> str | None:
        return self.principal.name if self.principal else None

    def require_admin(self, call: str) -> None:
        """The contract's role refusal for a global admin's change (the operator is one)."""
        if self.principal is not None and self.principal.role is not Role.admin:
            raise forbidden(role_refusal(call, Role.admin, self.principal.name, self.principal.role))

    @contextlib.contextmanager
    def acting(self, call: str, needs: Role = Role.reader) -> Iterator[None]:
        """The operation's units of work run as the actor (its projects only, `needs` in the one it changes); the
        operator's are unmarked and see everything."""
        if self.principal is None:
            yield
            return
        with acting_as(Caller(self.principal, call, needs)):
            yield

    async def audit(
        self,
        session: AsyncSession,
        action: str,
        details: dict[str, Any],
        target_ids: Iterable[Any] = (),
        project_id: Any = None,
    ) -> None:
        """The change's audit event, in the change's transaction."""
        user_id = self.principal.user_id if self.principal else None
        await AuditRepository(session).record(user_id, self.door, action, list(target_ids), project_id, details)


# How a call runs, for the tool boundary: a read lost on a replica runs again on the primary (app.db.replicas).
__all__ = ["Actor", "retried_on_primary"]
