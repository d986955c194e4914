"""What an admin sees and ends of MCP authorization: the users' OAuth grants (`synaptomind oauth grants|revoke`),
and the expiry job's purge of the rows nothing can use any more.

A grant is one code exchange and the refreshes after it (`oauth_token.family_id`, app.services.auth.oauth); it is
live while one of its tokens is unrevoked and unexpired. Revoking it ends every token of it at once, as
`POST /revoke` and a replayed refresh token do.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.repositories.oauth import GrantRow, OAuthRepository
from app.errors import not_found
from app.ids import parse_uuid
from app.services.admin.users import UserService


@dataclass(frozen=True)
class OAuthPurge:
    authorizations: int  # requests and codes past their expiry
    tokens: int  # expired tokens, and the tokens of grants with no live token left

    @property
    def total(self) -> int:
        return self.authorizations + self.tokens


async def purge_expired_oauth_rows(session: AsyncSession) -> OAuthPurge:
    """Delete what can never be redeemed again (the expiry job, app.services.jobs.background, in its transaction)."""
    repository = OAuthRepository(session)
    return OAuthPurge(await repository.purge_authorizations(), await repository.purge_tokens())


class OAuthGrantService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.oauth = OAuthRepository(session)

    async def list_grants(self, user_name: str | None = None) -> list[GrantRow]:
        """The live grants, oldest first; only that user's with `user_name` (404 for an unknown user)."""
        if user_name is None:
            return await self.oauth.live_grants()
        user = await UserService(self.session).find(user_name)
        return await self.oauth.live_grants(user.user_id)

    async def revoke_grant(self, grant_id: str) -> int:
        """End one grant: every token of it; the number of tokens revoked (404 when none was left)."""
        ended = await self.oauth.revoke_family(parse_uuid(grant_id, "GRANT_ID"))
        if not ended:
            raise not_found(f"No live OAuth grant with id {grant_id} (see `synaptomind oauth grants`)")
        return ended

    async def revoke_user_grants(self, user_name: str) -> int:
        """End every grant of the user (404 for an unknown user); the number of grants ended, 0 when none."""
        user = await UserService(self.session).find(user_name)
        assert user.user_id is not None
        return await self.oauth.revoke_user_tokens(user.user_id)
