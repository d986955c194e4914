"""Contract texts word for word for rows a non-member cannot see (docs/mcp-tools.md, "Per-project membership":
an id of a hidden row answers as an id that does not exist), with the contract's texts:
`Thought <id> not found`, `Edge not found: <id>`, the unlink preview's `not_found` item and the search's
`id_not_found` warning."""

from __future__ import annotations

import uuid

from app.db.models import Role
from app.services.admin.membership import MemberService
from app.services.context import AppContext
from tests.conftest import make_user
from tests.support.helpers import ToolCaller
from tests.support.search import id_not_found


async def _closed_vault(context: AppContext) -> tuple[ToolCaller, ToolCaller, str, str]:
    """A closed project (no everyone row; its creator its only member) with a thought and an edge.

    Returns (owner, nora, thought id, edge id); nora is a global admin, so only membership hides them.
    """
    owner = ToolCaller(context, await make_user(context, "owner", Role.admin))
    nora = ToolCaller(context, await make_user(context, "nora", Role.admin))
    project = await owner.ok("memory_manage", {"action": "create", "name": "Vault", "local_path": "/srv/vault"})
    ids = [
        str(
            (
                await owner.ok("memory_store", {"action": "create", "content": f"vault note {n}", "cwd": "/srv/vault"})
            ).item["id"]
        )
        for n in range(2)
    ]
    edge = await owner.ok("memory_store", {"action": "link", "source_id": ids[0], "target_id": ids[1]})
    async with context.db.unit_of_work() as session:
        members = MemberService(session)
        if any(row.user_id is None for row in await members.list(str(project.item["id"]))):
            await members.remove(str(project.item["id"]), None)  # closed: only its creator (its admin) sees it
    return owner, nora, ids[0], str(edge.item["id"])


async def test_a_hidden_thought_answers_the_not_found_text_of_a_missing_one(app_context: AppContext) -> None:
    owner, nora, thought_id, _ = await _closed_vault(app_context)
    assert not (await owner("memory_recall", {"action": "get", "thought_id": thought_id})).is_error
    hidden = await nora("memory_recall", {"action": "get", "thought_id": thought_id})
    assert hidden.text == f"Thought {thought_id} not found"
    assert hidden.error["statusCode"] == 404
    ghost = str(uuid.uuid4())
    missing = await nora("memory_recall", {"action": "get", "thought_id": ghost})
    assert missing.text == f"Thought {ghost} not found" and missing.error["statusCode"] == 404


async def test_a_hidden_edge_answers_the_edge_not_found_texts(app_context: AppContext) -> None:
    _, nora, _, edge_id = await _closed_vault(app_context)
    retype = await nora("memory_store", {"action": "retype", "edge_id": edge_id, "new_type": "supports"})
    assert retype.text == f"Edge not found: {edge_id}" and retype.error["statusCode"] == 404
    preview = await nora.ok("memory_store", {"action": "unlink", "edge_id": edge_id})
    assert preview.item == {"status": "not_found", "edge_id": edge_id}
    assert "preview" not in preview.meta


async def test_a_hidden_thoughts_full_id_searches_as_an_id_no_thought_carries(app_context: AppContext) -> None:
    owner, nora, thought_id, _ = await _closed_vault(app_context)
    seen = await owner.ok("memory_recall", {"action": "search", "query": thought_id, "compact": False})
    assert [item["thought"]["id"] for item in seen.items] == [thought_id]
    answer = await nora.ok("memory_recall", {"action": "search", "query": thought_id})
    assert answer.items == []
    assert answer.meta["reason"] == "id_not_found"
    assert id_not_found(thought_id) in answer.meta["warnings"]
