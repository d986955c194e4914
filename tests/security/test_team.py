from app.services.context import AppContext
from tests.support.team import changed_tables, table_digests, team


async def test_the_team_is_set_up_as_the_red_team_had_it(app_context: AppContext) -> None:
    cast = await team(app_context)
    before = await table_digests(app_context)
    hidden = await cast.bob("memory_recall", {"action": "search", "query": "master key", "cwd": cast.secret.path})
    assert "master key" not in hidden.text
    seen = await cast.carl.ok("memory_recall", {"action": "search", "query": "master key", "cwd": cast.secret.path})
    assert "secret master key" in seen.text
    assert changed_tables(before, await table_digests(app_context)) in ([], ["thought_hit"])
