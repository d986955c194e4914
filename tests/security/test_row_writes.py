"""Every write checks the caller's role on every row it changes (issue 22: B3, B4, B7 and the merge preview;
docs/SECURITY.md, "Every write checks every row").

Each write path is tried, over the tool boundary, by a reader member (carl, a reader in alice's closed project
`secret`) and by a non-member (bob, on the global thought of `secret`, which he may read but not write). Both see
their target; neither may change a row of `secret`: a refused call changes no table at all, and a call that goes
through (a link to the thought, a cluster that has it as a member, a read) changes none of `secret`'s rows — its
thoughts' importance included, which no row count would show.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from sqlalchemy import text

from app.db.models import Role
from app.services.context import AppContext
from app.services.jobs import background as jobs
from tests.support.console import signed_in, text_of, ui  # noqa: F401 (fixture)
from tests.support.helpers import ToolCaller, execute, own_transaction, rows
from tests.support.team import OPEN_PATH, Team, changed_tables, table_digests, team

OUTSIDERS = ("carl", "bob")  # a reader member of `secret`, and a non-member reading its global thought

# Every row of the closed projects, digested per table: what a call by an outsider must leave as it was. An edge
# belongs to its source's project (an outsider's own edge *to* a closed thought is theirs, not the project's).
_CLOSED_ROWS = {
    "project": "SELECT p::text FROM project p WHERE p.id = ANY(:projects)",
    "thought": "SELECT t::text FROM thought t WHERE t.project_id = ANY(:projects)",
    "edge": "SELECT e::text FROM edge e JOIN thought s ON s.id = e.source_id WHERE s.project_id = ANY(:projects)",
    "thought_hit": "SELECT h::text FROM thought_hit h WHERE h.project_id = ANY(:projects)",
    "primer": "SELECT p::text FROM primer p WHERE p.project_id = ANY(:projects)",
    "placement_proposal": "SELECT p::text FROM placement_proposal p WHERE p.project_id = ANY(:projects)",
    "slot": "SELECT s::text FROM slot s WHERE s.project_id = ANY(:projects)",
    "thought_url_link": "SELECT u::text FROM thought_url_link u WHERE u.project_id = ANY(:projects)",
}


async def closed_rows(cast: Team) -> dict[str, list[str]]:
    projects = [cast.secret.id, cast.vault.id]
    found: dict[str, list[str]] = {}
    async with own_transaction(cast.alice.context) as session:
        for table, sql in _CLOSED_ROWS.items():
            result = await session.execute(text(f"{sql} ORDER BY 1"), {"projects": projects})
            found[table] = [str(row[0]) for row in result]
    return found


def outsider(cast: Team, name: str) -> tuple[ToolCaller, str]:
    """The outsider and the thought of `secret` they can read but not write."""
    if name == "carl":
        return cast.carl, cast.secret.thought_ids[2]
    return cast.bob, cast.global_thought_id


async def own_thought(caller: ToolCaller, content: str) -> str:
    """A thought of the caller's own, in the open project (a writer there)."""
    stored = await caller.ok("memory_store", {"action": "create", "content": content, "cwd": OPEN_PATH})
    return str(stored.item["id"])


def role_refusal(tool: str, action: str, user: str) -> str:
    return f"Forbidden: {tool} action={action} needs the writer role; user '{user}' is a reader"


async def refused_unchanged(caller: ToolCaller, tool: str, arguments: dict[str, Any]) -> None:
    """The call is the writer's role refusal (in the project of the row it would change) and no table changed."""
    before = await table_digests(caller.context)
    answer = await caller(tool, arguments)
    assert answer.error["statusCode"] == 403, answer.text
    assert answer.error["message"] == role_refusal(tool, arguments["action"], caller.principal.name)
    assert changed_tables(before, await table_digests(caller.context)) == []


async def confirmed_call(caller: ToolCaller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The confirm of a preview the caller may make: the arguments with its token."""
    preview = await caller.ok(tool, arguments)
    return {**arguments, "confirm": True, "preview_token": preview.meta["preview"]["token"]}


async def decayed(caller: ToolCaller, thought_id: str) -> None:
    """The thought's importance as the decay leaves it (a new thought's is 1.0, the cap no bonus moves)."""
    await execute(caller, "UPDATE thought SET importance = 0.8145 WHERE id = CAST(:id AS uuid)", id=thought_id)


async def importance(caller: ToolCaller, thought_id: str) -> float:
    [(value,)] = await rows(caller, "SELECT importance FROM thought WHERE id = CAST(:id AS uuid)", id=thought_id)
    return float(value)


# ---------------------------------------------------------------- B3: parent edges


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_a_child_under_a_thought_one_may_not_write_is_refused(app_context: AppContext, name: str) -> None:
    cast = await team(app_context)
    caller, parent = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note")
    # As `link` from that thought is: a parent edge parent → child belongs to the parent's project.
    await refused_unchanged(caller, "memory_store", {"action": "link", "source_id": parent, "target_id": mine})
    create = {"action": "create", "content": "a child of a thought I may only read", "parent_id": parent}
    await refused_unchanged(caller, "memory_store", create)
    await refused_unchanged(caller, "memory_store", {**create, "cwd": OPEN_PATH})
    thoughts = [
        {"content": "a row of my own"},
        {"content": "a child row of a thought I may only read", "parent_id": parent},
    ]
    bulk = {"action": "bulk_create", "thoughts": thoughts, "cwd": OPEN_PATH}
    await refused_unchanged(caller, "memory_store", bulk)  # one such row refuses the call: nothing is written


async def test_a_child_under_a_thought_one_may_write_lives_in_the_parents_project(app_context: AppContext) -> None:
    cast = await team(app_context)
    parent = await own_thought(cast.carl, "a parent of carl's own")
    child = await cast.carl.ok("memory_store", {"action": "create", "content": "carl's child", "parent_id": parent})
    [(source, project)] = await rows(
        cast.carl,
        "SELECT source_id::text, project_id::text FROM edge WHERE target_id = CAST(:id AS uuid)",
        id=child.item["id"],
    )
    assert (source, project) == (parent, cast.open_project_id)  # an edge belongs to its source's project


# ---------------------------------------------------------------- B4: importance bumps of links and clusters


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_linking_to_a_thought_one_may_not_write_leaves_it_unchanged(app_context: AppContext, name: str) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note that points at a shared one")
    other = await own_thought(caller, f"{name}'s second note that points at a shared one")
    for thought_id in (hidden, mine):
        await decayed(caller, thought_id)
    before = await closed_rows(cast)

    await caller.ok("memory_store", {"action": "link", "source_id": mine, "target_id": hidden})
    links = [{"source": other, "target": hidden, "type": "supports"}]
    batch = await caller.ok("memory_store", {"action": "link_batch", "links": links})
    assert (batch.meta["counts"]["linked"], batch.meta["counts"]["failed"]) == (1, 0)

    assert await closed_rows(cast) == before  # the target's importance did not move
    assert await importance(caller, mine) > 0.8145  # the caller's own end still gets its bonus


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_clustering_a_thought_one_may_not_write_leaves_it_unchanged(app_context: AppContext, name: str) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note to cluster")
    await decayed(caller, hidden)
    before = await closed_rows(cast)

    made = await caller.ok("memory_crystallize", {"action": "cluster", "thought_ids": [mine, hidden]})
    assert made.meta["counts"]["members"] == 2  # a member is only linked to: it may be read-only

    assert await closed_rows(cast) == before


async def test_a_cluster_of_thoughts_of_a_project_one_only_reads_is_refused(app_context: AppContext) -> None:
    cast = await team(app_context)
    members = cast.secret.thought_ids[:2]
    await refused_unchanged(cast.carl, "memory_crystallize", {"action": "cluster", "thought_ids": members})


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_a_link_that_would_upgrade_an_edge_of_the_other_end_is_refused(
    app_context: AppContext, name: str
) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note alice links to")
    # alice's `related` edge from her thought to the outsider's: it belongs to her project.
    await cast.alice.ok("memory_store", {"action": "link", "source_id": hidden, "target_id": mine})
    # Linking back with another type would upgrade her edge in place (same id, the new type and direction).
    link = {"action": "link", "source_id": mine, "target_id": hidden, "edge_type": "supports"}
    await refused_unchanged(caller, "memory_store", link)


# ---------------------------------------------------------------- unlink and retype through the edge's other end


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_an_edge_of_the_other_end_cannot_be_unlinked_or_retyped(app_context: AppContext, name: str) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note alice points at")
    edge = await cast.alice.ok("memory_store", {"action": "link", "source_id": hidden, "target_id": mine})
    edge_id = str(edge.item["id"])
    await refused_unchanged(caller, "memory_store", {"action": "unlink", "edge_id": edge_id})
    await refused_unchanged(caller, "memory_store", {"action": "unlink_batch", "edge_ids": [edge_id]})
    await refused_unchanged(caller, "memory_store", {"action": "retype", "edge_id": edge_id, "new_type": "supports"})


# ---------------------------------------------------------------- merges and compaction


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_merging_ones_own_thought_leaves_the_other_ends_edges_where_they_are(
    app_context: AppContext, name: str
) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    source = await own_thought(caller, f"{name}'s note to merge away")
    target = await own_thought(caller, f"{name}'s note that stays")
    await cast.alice.ok("memory_store", {"action": "link", "source_id": hidden, "target_id": source})
    before = await closed_rows(cast)

    merge = {"action": "merge", "source_id": source, "target_id": target}
    merged = await caller.ok("memory_supersede", await confirmed_call(caller, "memory_supersede", merge))
    assert merged.item["result"]["edges_transferred"] == 0  # alice's edge stays on the archived source

    assert await closed_rows(cast) == before


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_a_merge_into_or_out_of_a_read_only_thought_is_refused_in_its_preview(
    app_context: AppContext, name: str
) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note next to a shared one")
    for source, target in ((mine, hidden), (hidden, mine)):
        await refused_unchanged(
            caller, "memory_supersede", {"action": "merge", "source_id": source, "target_id": target}
        )


async def test_a_merge_preview_into_a_project_where_one_is_a_reader_issues_no_token(app_context: AppContext) -> None:
    """The merge's cwd moves the target into that project: the preview checks the role its confirm needs."""
    cast = await team(app_context)
    source = await own_thought(cast.carl, "carl's note to merge away")
    target = await own_thought(cast.carl, "carl's note that would move into secret")
    merge = {"action": "merge", "source_id": source, "target_id": target, "cwd": cast.secret.path}
    await refused_unchanged(cast.carl, "memory_supersede", merge)


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_compacting_a_read_only_thought_or_into_a_closed_project_is_refused(
    app_context: AppContext, name: str
) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s draft to compact")
    await caller.ok("memory_store", {"action": "update", "thought_id": mine, "status": "draft"})
    summary = {"content": f"{name}'s summary"}
    compact = {"action": "compact", "source_ids": [mine, hidden], "summary": summary, "confirm": True}
    await refused_unchanged(caller, "retention_review", compact)
    into_secret = {**compact, "source_ids": [mine], "summary": {**summary, "project_id": cast.secret.id}}
    await refused_unchanged(cast.carl, "retention_review", into_secret)


async def test_auto_cluster_groups_the_same_whatever_other_projects_hold(app_context: AppContext) -> None:
    """auto_cluster clusters only what the caller may write, and its neighbours are drawn from there too: near
    copies in a project the caller cannot see (or may only read) must not take the places of their own neighbours."""
    cast = await team(app_context)
    pair = ["The deploy pipeline pushes images to the registry", "Rollbacks restore the previous registry image"]
    mine = [await own_thought(cast.carl, content) for content in pair]
    copies = [{"content": f"{content} (copy {n})"} for content in pair for n in range(10)]
    for owner_path in (cast.vault.path, cast.secret.path):  # carl cannot see vault; he only reads secret
        await cast.alice.ok("memory_store", {"action": "bulk_create", "thoughts": copies, "cwd": owner_path})
    old_enough = "UPDATE thought SET created_at = now() - interval '10 days' WHERE content LIKE ANY(:patterns)"
    await execute(cast.alice, old_enough, patterns=[f"{content}%" for content in pair])
    before = await closed_rows(cast)

    call = {"action": "auto_cluster", "min_similarity": 0.9, "min_members": 2}
    preview = await cast.carl.ok("memory_crystallize", call)
    groups = [sorted(member["id"] for member in group["members"]) for group in preview.items]
    assert groups == [sorted(mine)]
    done = await cast.carl.ok("memory_crystallize", await confirmed_call(cast.carl, "memory_crystallize", call))
    assert len(done.items) == 1
    assert await closed_rows(cast) == before


# ---------------------------------------------------------------- the thought's own writes


@pytest.mark.parametrize("name", OUTSIDERS)
async def test_every_write_of_a_read_only_thought_is_refused(app_context: AppContext, name: str) -> None:
    cast = await team(app_context)
    caller, hidden = outsider(cast, name)
    mine = await own_thought(caller, f"{name}'s note to move")
    for tool, arguments in (
        ("memory_store", {"action": "update", "thought_id": hidden, "tags": ["mine now"]}),
        ("memory_supersede", {"action": "archive", "thought_id": hidden}),
        ("memory_supersede", {"action": "archive_batch", "thought_ids": [mine, hidden]}),
        ("retention_review", {"action": "protect", "thought_id": hidden, "protected": True}),
        ("retention_review", {"action": "delete", "thought_id": hidden}),
        ("edge_review", {"action": "enqueue", "thought_id": hidden}),
    ):
        await refused_unchanged(caller, tool, arguments)
    move = {"action": "update", "thought_id": mine, "cwd": cast.secret.path}  # carl sees secret: a move into it
    await refused_unchanged(cast.carl, "memory_store", move)
    reflect = {"action": "reflect", "summary": "carl was here", "decisions": ["carl decides"], "cwd": cast.secret.path}
    await refused_unchanged(cast.carl, "memory_reflect", reflect)


# ---------------------------------------------------------------- proposals, primers


async def test_proposals_and_primers_of_a_project_one_only_reads_are_refused(app_context: AppContext) -> None:
    cast = await team(app_context)
    subject = cast.secret.thought_ids[2]
    queued = await cast.alice.ok("edge_review", {"action": "enqueue", "thought_id": subject})
    [proposal, *_] = queued.item["proposal_ids"]
    apply = {"action": "apply", "proposal_id": proposal}
    await refused_unchanged(cast.carl, "edge_review", apply)
    await refused_unchanged(cast.carl, "edge_review", {"action": "apply_batch", "proposal_ids": [proposal]})
    await refused_unchanged(cast.carl, "edge_review", {"action": "reject", "proposal_id": proposal})
    applied = await cast.alice.ok("edge_review", await confirmed_call(cast.alice, "edge_review", apply))
    run_id = applied.item["run_id"]
    await refused_unchanged(cast.carl, "edge_review", {"action": "rollback", "run_id": run_id})

    await execute(
        cast.alice,
        "INSERT INTO primer (id, thought_id, project_id) "
        "VALUES (gen_random_uuid(), CAST(:t AS uuid), CAST(:p AS uuid))",
        t=subject,
        p=cast.secret.id,
    )
    [(primer,)] = await rows(cast.alice, "SELECT id::text FROM primer")
    await refused_unchanged(cast.carl, "memory_primers", {"action": "delete", "primer_id": primer})


async def test_applying_a_proposal_whose_link_starts_in_a_read_only_project_is_refused_in_its_preview(
    app_context: AppContext,
) -> None:
    """A proposal of `open` (carl writes there) linking alice's thought of `secret` (carl only reads it): applying
    writes an edge of `secret`, so the preview refuses as the confirm would, instead of issuing a token."""
    cast = await team(app_context)
    subject = cast.secret.thought_ids[2]
    await cast.alice.ok(
        "memory_store", {"action": "create", "content": "secret master key note 2 (open copy)", "cwd": OPEN_PATH}
    )
    queued = await cast.alice.ok("edge_review", {"action": "enqueue", "thought_id": subject, "cwd": OPEN_PATH})
    [proposal, *_] = queued.item["proposal_ids"]
    await refused_unchanged(cast.carl, "edge_review", {"action": "apply", "proposal_id": proposal})
    await refused_unchanged(cast.carl, "edge_review", {"action": "apply_batch", "proposal_ids": [proposal]})


# ---------------------------------------------------------------- hits: a read's bookkeeping


async def test_a_non_members_read_of_a_global_thought_counts_no_hit(app_context: AppContext) -> None:
    """Hits are what members' reads record (a reader's too); a non-member's read changes nothing of the project."""
    cast = await team(app_context)
    before = await closed_rows(cast)
    await cast.bob.ok("memory_recall", {"action": "get", "thought_id": cast.global_thought_id})
    found = await cast.bob.ok("memory_recall", {"action": "search", "query": "a global note everyone reads"})
    assert cast.global_thought_id in found.text
    assert await closed_rows(cast) == before

    await cast.carl.ok("memory_recall", {"action": "get", "thought_id": cast.global_thought_id})
    hits = await rows(
        cast.carl, "SELECT hit_count FROM thought_hit WHERE thought_id = CAST(:id AS uuid)", id=cast.global_thought_id
    )
    assert hits == [(1,)]  # carl is a member of secret (a reader): his read counts


# ---------------------------------------------------------------- B7: the operations page


async def test_the_operations_page_counts_and_job_lines_leave_out_what_the_admin_cannot_see(
    ui: httpx2.AsyncClient,  # noqa: F811
    app_context: AppContext,
) -> None:
    cast = await team(app_context)
    app_context.settings_view.update({"jobs.enabled": True})
    await jobs.run_jobs_tick(app_context.db, app_context.settings)
    [(stored,)] = await rows(cast.admin, "SELECT outcome FROM job_run WHERE job = 'project_counts'")
    assert stored.endswith("project(s) counted")  # the job counts every project, the two closed ones included

    await signed_in(ui, app_context, "admin", Role.admin)
    page = text_of((await ui.get("/ui/admin/operations")).text)
    assert cast.secret.path not in page and cast.vault.path not in page
    assert "project(s) counted" not in page and stored not in page
    # The totals are the listed rows': bob's two thoughts in `open`; not the global thought of `secret` (readable
    # to everyone, but of a project the admin does not see).
    assert "open /srv/team/open 2 0 0 2" in page and "Every project 2 0 0 2" in page
