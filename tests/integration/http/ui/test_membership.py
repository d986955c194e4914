"""Per-project membership on the console's own reads (docs/SECURITY.md): the pages that call services directly
(operations counts, the thoughts beside a review queue) see what the signed-in user sees over MCP, not more."""

from __future__ import annotations

import httpx2

from app.db.models import Role
from app.services.context import AppContext
from tests.support.console import signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller
from tests.support.membership import SECRET, close, vault


async def test_the_operations_counts_leave_out_a_closed_project_of_which_the_admin_is_no_member(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
    admin: ToolCaller,
) -> None:
    await vault(admin)  # three thoughts in Vault, its creator `admin` its admin
    await admin.ok("memory_store", {"action": "create", "content": "A thought of the open default project"})

    await signed_in(ui, app_context, "ada", Role.admin)
    open_page = text_of((await ui.get("/ui/admin/operations")).text)
    assert "Vault" in open_page and "Every project 4 0 0 4" in open_page  # open to everyone: every thought

    await close(app_context, "Vault", {})
    closed_page = text_of((await ui.get("/ui/admin/operations")).text)
    assert "Vault" not in closed_page and SECRET not in closed_page
    assert "Every project 1 0 0 1" in closed_page  # only the default project's thought
