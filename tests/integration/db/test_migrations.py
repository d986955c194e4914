"""Alembic owns the schema: the history is reversible, matches the ORM, and enforces the integrity rules.

The migration cycle runs on a scratch database created on the same server as the session database
(so it never disturbs the migrated database the other tests share) and dropped at the end.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from alembic import command
from app.db import graphs, migrations, project_indexes
from app.db.engine import Database
from app.db.models import Base
from app.db.repositories.projects import ProjectRepository

MODEL_TABLES = {table.name for table in Base.metadata.sorted_tables}
ENUM_TYPES = {"thought_status", "edge_type", "user_role", "proposal_status"}
HEAD = ScriptDirectory.from_config(migrations.alembic_config("postgresql+asyncpg://unused/x")).get_current_head()


# ---------------------------------------------------------------- scratch database


def _scratch(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
async def scratch_url(database_url: str) -> AsyncIterator[str]:
    name = f"synapto_migrations_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(database_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    async with admin.connect() as connection:
        await connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield _scratch(database_url, name)
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def _engine(url: str) -> AsyncEngine:
    return create_async_engine(url, poolclass=NullPool)


async def _schema_state(url: str) -> dict[str, Any]:
    engine = await _engine(url)
    try:
        async with engine.connect() as connection:

            async def names(sql: str) -> set[str]:
                return {row[0] for row in await connection.execute(text(sql))}

            tables = await names("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            version: set[str] = set()
            if "alembic_version" in tables:
                version = await names("SELECT version_num FROM alembic_version")
            return {
                "tables": tables,
                "enums": await names(
                    "SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                    "WHERE n.nspname = 'public' AND t.typtype = 'e'"
                ),
                "triggers": await names("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"),
                "functions": await names(
                    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                    "WHERE n.nspname = 'public' "
                    "AND (p.proname IN ('edge_cluster_source_check', 'project_open_to_everyone', "
                    "'thought_followers_move') "
                    "OR p.proname LIKE 'lexical%')"
                ),
                "version": version,
                "extensions": await names("SELECT extname FROM pg_extension WHERE extname <> 'plpgsql'"),
                "thought_options": await names(
                    "SELECT unnest(coalesce(reloptions, '{}')) FROM pg_class WHERE relname = 'thought'"
                ),
                # 0022: the planner's view of the visibility rule's small tables (reltuples -1: never analyzed)
                "membership_options": await names(
                    "SELECT relname || ':' || unnest(coalesce(reloptions, '{}')) FROM pg_class "
                    "WHERE relname IN ('project', 'project_member') AND relkind = 'r'"
                ),
                "analyzed": await names(
                    "SELECT relname FROM pg_class WHERE relname IN ('project', 'project_member') "
                    "AND relkind = 'r' AND reltuples >= 0"
                ),
            }
    finally:
        await engine.dispose()


# Migration 0009: the BM25 statistics are kept by triggers on thought.
LEXICAL_TRIGGERS = {"thought_lexical_insert", "thought_lexical_delete", "thought_lexical_update"}
LEXICAL_FUNCTIONS = {
    "lexical_count",
    "lexical_after_insert",
    "lexical_after_delete",
    "lexical_after_update",
    "lexical_rebuild",
}


def _assert_at_head(state: dict[str, Any]) -> None:
    assert state["tables"] == MODEL_TABLES | {"alembic_version"}
    assert state["enums"] == ENUM_TYPES
    rules = {"edge_cluster_source_check", "project_open_to_everyone", "thought_followers_move"}  # 0001, 0017, 0026
    assert state["triggers"] == {*rules, *LEXICAL_TRIGGERS}
    assert state["functions"] == {*rules, *LEXICAL_FUNCTIONS}
    assert state["version"] == {HEAD}
    assert state["extensions"] == {"vector", "btree_gin"}
    assert state["thought_options"] == {"fillfactor=70"}  # importance updates stay HOT
    assert state["membership_options"] == {
        "project:autovacuum_analyze_threshold=5",
        "project_member:autovacuum_analyze_threshold=5",
    }
    assert state["analyzed"] == {"project", "project_member"}


async def test_upgrade_downgrade_upgrade_round_trip(scratch_url: str) -> None:
    # env.py runs its own event loop (asyncio.run), so Alembic is driven from a worker thread.
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    _assert_at_head(await _schema_state(scratch_url))

    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    base = await _schema_state(scratch_url)
    assert base["tables"] == {"alembic_version"}  # Alembic keeps its (now empty) bookkeeping table
    assert base["version"] == set()
    assert base["enums"] == set()
    assert base["triggers"] == set()
    assert base["functions"] == set()
    assert base["extensions"] == {"vector"}  # kept: a downgrade does not drop what other schemas may use

    await asyncio.to_thread(migrations.upgrade, scratch_url)
    _assert_at_head(await _schema_state(scratch_url))


async def test_the_bm25_statistics_are_counted_for_existing_thoughts(scratch_url: str) -> None:
    """Upgrading a store with thoughts from 0008 fills lexical_corpus and lexical_term from its rows."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    await asyncio.to_thread(migrations.upgrade, scratch_url, "7d2b4e9f1a6c")
    engine = await _engine(scratch_url)
    project = uuid.uuid4()
    try:
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO project (id, name) VALUES (:id, 'p')"), {"id": project})
            await connection.execute(
                text(
                    "INSERT INTO thought (id, project_id, content) VALUES "
                    "(gen_random_uuid(), :p, 'cats chase cats'), (gen_random_uuid(), :p, 'a cat sleeps')"
                ),
                {"p": project},
            )
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        async with engine.connect() as connection:
            corpus = (await connection.execute(text("SELECT thoughts, tokens FROM lexical_corpus"))).all()
            terms = dict((await connection.execute(text("SELECT lexeme, thoughts FROM lexical_term"))).all())
    finally:
        await engine.dispose()
    assert [tuple(row) for row in corpus] == [(2, 4)]  # lengths: {cat, chase} and {cat, sleep}
    assert terms == {"cat": 2, "chase": 1, "sleep": 1}


async def test_tokens_from_before_expiry_never_expire(scratch_url: str) -> None:
    """0010 adds `api_token.expires_at` as NULL (never) for the tokens that exist: nobody is locked out."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    await asyncio.to_thread(migrations.upgrade, scratch_url, "b7c3e5a91d2f")
    engine = await _engine(scratch_url)
    try:
        async with engine.begin() as connection:
            user = (
                await connection.execute(
                    text(
                        "INSERT INTO app_user (id, name, role) VALUES (gen_random_uuid(), 'old', 'reader') RETURNING id"
                    )
                )
            ).scalar_one()
            await connection.execute(
                text("INSERT INTO api_token (id, user_id, token_hash) VALUES (gen_random_uuid(), :u, :h)"),
                {"u": user, "h": bytes(32)},
            )
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        async with engine.connect() as connection:
            expiries = (await connection.execute(text("SELECT expires_at FROM api_token"))).scalars().all()
        await asyncio.to_thread(migrations.downgrade, scratch_url, "b7c3e5a91d2f")
        async with engine.connect() as connection:
            columns = (
                (
                    await connection.execute(
                        text("SELECT column_name FROM information_schema.columns WHERE table_name = 'api_token'")
                    )
                )
                .scalars()
                .all()
            )
            tokens = (await connection.execute(text("SELECT count(*) FROM api_token"))).scalar_one()
    finally:
        await engine.dispose()
        await asyncio.to_thread(migrations.upgrade, scratch_url)
    assert expiries == [None]
    assert "expires_at" not in columns and tokens == 1  # the downgrade drops the column, not the tokens


async def test_every_project_is_open_to_everyone_after_0017(scratch_url: str) -> None:
    """0017: the projects that exist get an everyone row with role admin (nothing changes for anyone), and so does
    every project inserted later, by whatever path (the trigger)."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    await asyncio.to_thread(migrations.upgrade, scratch_url, "9e2c7d41a5b3")
    engine = await _engine(scratch_url)
    before, after = uuid.uuid4(), uuid.uuid4()
    members = "SELECT project_id, user_id, role::text FROM project_member ORDER BY created_at, project_id"
    try:
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO project (id, name) VALUES (:id, 'old')"), {"id": before})
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        async with engine.begin() as connection:
            migrated = [tuple(row) for row in await connection.execute(text(members))]
            await connection.execute(text("INSERT INTO project (id, name) VALUES (:id, 'new')"), {"id": after})
            inserted = [tuple(row) for row in await connection.execute(text(members))]
        await asyncio.to_thread(migrations.downgrade, scratch_url, "9e2c7d41a5b3")
        async with engine.connect() as connection:
            tables = await connection.execute(text("SELECT to_regclass('project_member') IS NULL"))
            dropped = tables.scalar_one()
            projects = (await connection.execute(text("SELECT count(*) FROM project"))).scalar_one()
    finally:
        await engine.dispose()
        await asyncio.to_thread(migrations.upgrade, scratch_url)
    assert migrated == [(before, None, "admin")]
    assert sorted(inserted, key=str) == sorted([(before, None, "admin"), (after, None, "admin")], key=str)
    assert dropped and projects == 2  # the downgrade drops the memberships, not the projects


async def test_the_repository_opens_a_new_project_to_everyone_without_the_trigger(scratch_url: str) -> None:
    """Citus cannot run `project_open_to_everyone` (scripts/citus/distribute.sql drops it), so ProjectRepository
    writes the everyone row itself, for an ordinary project and for the default one; on one node, where the trigger
    wrote it already, its own write is a no-op (one row, not two)."""
    everyone = "SELECT count(*) FROM project_member WHERE project_id = :id AND user_id IS NULL AND role = 'admin'"
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    engine = await _engine(scratch_url)
    try:
        # Rolled back: the scratch database keeps its trigger and its default project.
        async with AsyncSession(engine) as session, session.begin() as transaction:
            repository = ProjectRepository(session)
            with_trigger = await repository.insert(f"with trigger {uuid.uuid4()}", None, None)
            await session.execute(text("ALTER TABLE project DISABLE TRIGGER project_open_to_everyone"))
            await session.execute(text("DELETE FROM project WHERE is_default"))
            by_sql = uuid.uuid4()
            await session.execute(
                text("INSERT INTO project (id, name) VALUES (:id, :name)"), {"id": by_sql, "name": str(by_sql)}
            )
            without_trigger = await repository.insert(f"without trigger {uuid.uuid4()}", None, None)
            default = (await repository.ensure_default()).id
            projects = (with_trigger, by_sql, without_trigger, default)
            rows = [(await session.execute(text(everyone), {"id": p})).scalar_one() for p in projects]
            await transaction.rollback()
    finally:
        await engine.dispose()
    assert rows == [1, 0, 1, 1]


async def _shared_graphs(engine: AsyncEngine) -> list[tuple[str, bool, list[str]]]:
    async with engine.connect() as connection:
        found = await connection.execute(
            text(
                "SELECT c.relname, i.indisvalid, c.reloptions FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE starts_with(c.relname, :name) ORDER BY 1"
            ),
            {"name": graphs.SHARED_INDEX},
        )
        return [(row.relname, row.indisvalid, sorted(row.reloptions or [])) for row in found]


async def test_0023_moves_an_existing_shared_graph_to_the_declared_parameters(scratch_url: str) -> None:
    """A store at 0022 holds 0005's shared graph (m 12 / ef_construction 128) over its vectors: the upgrade builds
    the declared graph (SHARED_GRAPH) beside it, after dropping what a run cut short left, and the replacement takes
    the name; the downgrade brings 0005's back."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    await asyncio.to_thread(migrations.upgrade, scratch_url, "8e4f1a6c2d93")
    engine = await _engine(scratch_url)
    declared = sorted(f"{key}={value}" for key, value in graphs.SHARED_GRAPH.options().items())
    try:
        async with engine.begin() as connection:
            project = uuid.uuid4()
            await connection.execute(text("INSERT INTO project (id, name) VALUES (:id, 'p')"), {"id": project})
            for n in range(1, 4):
                vector = "[" + ",".join(str((n * (d + 1)) % 7 + 1) for d in range(384)) + "]"
                await connection.execute(
                    text(
                        "INSERT INTO thought (id, project_id, content, embedding, embedding_model) "
                        "VALUES (gen_random_uuid(), :p, :c, CAST(:v AS vector(384)), 'm')"
                    ),
                    {"p": project, "c": f"thought {n}", "v": vector},
                )
            # As a run of 0023 killed mid-build leaves it (any index of that name: it is dropped, not read).
            await connection.execute(text(f"CREATE INDEX {graphs.SHARED_INDEX}{graphs.NEXT_SUFFIX} ON thought (id)"))
        before = await _shared_graphs(engine)
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        after = await _shared_graphs(engine)
        async with engine.connect() as connection:
            definition = (
                await connection.execute(text("SELECT pg_get_indexdef(to_regclass(:n))"), {"n": graphs.SHARED_INDEX})
            ).scalar_one()
            # The new graph holds the rows that existed before it: a walk of it (the only plan left) finds them.
            for setting in ("enable_seqscan", "enable_sort"):
                await connection.execute(text(f"SET LOCAL {setting} = off"))
            walked = await connection.execute(
                text(
                    "SELECT count(*) FROM (SELECT id FROM thought ORDER BY CAST(embedding AS halfvec(384)) "
                    "<=> CAST(:v AS halfvec(384)) LIMIT 10) nearest"
                ),
                {"v": "[" + ",".join(["1"] * 384) + "]"},
            )
            thoughts = walked.scalar_one()
        await asyncio.to_thread(migrations.downgrade, scratch_url, "8e4f1a6c2d93")
        restored = await _shared_graphs(engine)
    finally:
        await engine.dispose()
        await asyncio.to_thread(migrations.upgrade, scratch_url)
    assert before == [
        (graphs.SHARED_INDEX, True, ["ef_construction=128", "m=12"]),
        (graphs.SHARED_INDEX + graphs.NEXT_SUFFIX, True, []),
    ]
    assert after == [(graphs.SHARED_INDEX, True, declared)]
    assert declared != ["ef_construction=128", "m=12"]  # the upgrade changed the graph
    assert "USING hnsw (((embedding)::halfvec(384)) halfvec_cosine_ops)" in definition and thoughts == 3
    assert restored == [(graphs.SHARED_INDEX, True, ["ef_construction=128", "m=12"])]


async def _indexes(engine: AsyncEngine, names: list[str]) -> dict[str, bool]:
    async with engine.connect() as connection:
        found = await connection.execute(
            text(
                "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = ANY(:names)"
            ),
            {"names": names},
        )
        return {row.relname: row.indisvalid for row in found}


async def test_0024_backfills_the_content_facts_in_batches_and_resumes_a_run_cut_short(scratch_url: str) -> None:
    """A store at 0023 with more thoughts than one batch of the backfill: after the upgrade every row's `lexemes` and
    `content_md5` are its content's and the indexes are valid. A run cut short — the columns added, some rows
    filled (one wrongly), an index build interrupted (left invalid) — is completed by the next one. The downgrade
    drops the columns and indexes, not the rows."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "base")
    await asyncio.to_thread(migrations.upgrade, scratch_url, "c4a1ce99e392")
    engine = await _engine(scratch_url)
    names = [
        "ix_thought_project_content_facts",
        "ix_thought_content_facts_stale",
        "ix_thought_id_facts",
        "ix_thought_untagged",
        "ix_thought_short_content",
    ]
    facts = (
        "SELECT count(*) AS thoughts, count(*) FILTER (WHERE lexemes = length(tsv) "
        "AND content_md5 = md5(content)::uuid) AS exact FROM thought"
    )
    thoughts = 5000 + 7  # the migration's batch, and a few more
    try:
        async with engine.begin() as connection:
            project = uuid.uuid4()
            await connection.execute(text("INSERT INTO project (id, name) VALUES (:id, 'p')"), {"id": project})
            await connection.execute(
                text(
                    "INSERT INTO thought (id, project_id, content, tags) SELECT gen_random_uuid(), :p, "
                    "'note ' || n || repeat(' about cats and dogs', n % 4), "
                    "CASE WHEN n % 2 = 0 THEN ARRAY['t'] ELSE '{}' END FROM generate_series(1, :n) AS n"
                ),
                {"p": project, "n": thoughts},
            )
            # As a run killed mid-way leaves it: columns, some rows filled (one with a wrong count).
            await connection.execute(
                text("ALTER TABLE thought ADD COLUMN lexemes integer, ADD COLUMN content_md5 uuid")
            )
            await connection.execute(
                text(
                    "UPDATE thought SET lexemes = length(tsv) + (content = 'note 3')::int, "
                    "content_md5 = md5(content)::uuid WHERE content < 'note 4'"
                )
            )
        async with engine.connect() as connection:  # an interrupted CONCURRENTLY build: an invalid index
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            with pytest.raises(IntegrityError):
                await connection.execute(text("CREATE UNIQUE INDEX CONCURRENTLY ix_thought_untagged ON thought ((1))"))
        assert await _indexes(engine, names) == {"ix_thought_untagged": False}
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        async with engine.connect() as connection:
            counted = (await connection.execute(text(facts))).one()
            untagged = await connection.execute(text("SELECT pg_get_indexdef(to_regclass('ix_thought_untagged'))"))
            definition = untagged.scalar_one()
        built = await _indexes(engine, names)
        await asyncio.to_thread(migrations.downgrade, scratch_url, "c4a1ce99e392")
        async with engine.connect() as connection:
            columns = await connection.execute(
                text(
                    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'thought' "
                    "AND column_name IN ('lexemes', 'content_md5')"
                )
            )
            left = columns.scalar_one()
            kept = (await connection.execute(text("SELECT count(*) FROM thought"))).scalar_one()
        dropped = await _indexes(engine, names)
    finally:
        await engine.dispose()
        await asyncio.to_thread(migrations.upgrade, scratch_url)
    assert tuple(counted) == (thoughts, thoughts)
    assert built == dict.fromkeys(names, True)
    assert "WHERE (cardinality(tags) = 0)" in definition  # built again, not the leftover
    assert left == 0 and kept == thoughts and dropped == {}


# ---------------------------------------------------------------- drift


def _compare(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _flatten(diffs: list[Any]) -> list[tuple[Any, ...]]:
    """compare_metadata nests column modifications in a list; flatten to (op, table, name) tuples."""
    flat: list[tuple[Any, ...]] = []
    for diff in diffs:
        if isinstance(diff, list):
            flat.extend((op[0], op[2], op[3]) for op in diff)
        elif diff[0] in ("add_index", "remove_index"):
            flat.append((diff[0], diff[1].table.name, diff[1].name))
        else:
            flat.append((diff[0], str(diff[1])))
    return flat


async def test_0026_puts_the_rows_a_move_left_behind_in_their_thoughts_project(scratch_url: str) -> None:
    """At 0025 a moved thought's edge, url link, hit, primer and proposal kept the old project (a move changed the
    thought alone); after 0026 each names its thought's project, rows already in place are untouched, and the
    trigger moves them with the next move, whoever writes it."""
    await asyncio.to_thread(migrations.downgrade, scratch_url, "5e0c7b2f9a14")
    engine = await _engine(scratch_url)
    old, new, moved, stayed, other = (uuid.uuid4() for _ in range(5))
    ids = {"old": old, "new": new, "moved": moved, "stayed": stayed, "other": other}
    followers = """
        SELECT 'edge', project_id FROM edge UNION ALL SELECT 'link', project_id FROM thought_url_link
        UNION ALL SELECT 'hit', project_id FROM thought_hit UNION ALL SELECT 'primer', project_id FROM primer
        UNION ALL SELECT 'proposal', project_id FROM placement_proposal"""
    try:
        async with engine.begin() as connection:
            for statement in (
                "INSERT INTO project (id, name) VALUES (:old, 'old'), (:new, 'new')",
                "INSERT INTO thought (id, project_id, content) VALUES (:moved, :old, 'm'), (:stayed, :old, 's'), "
                "(:other, :old, 'o')",
                "INSERT INTO edge (id, project_id, source_id, target_id, type) VALUES "
                "(gen_random_uuid(), :old, :moved, :other, 'related'), "
                "(gen_random_uuid(), :old, :stayed, :moved, 'supports')",
                "INSERT INTO thought_url_link (id, project_id, thought_id, text, url, label) "
                "VALUES (gen_random_uuid(), :old, :moved, 'x', 'https://example.org', 'x')",
                "INSERT INTO thought_hit (thought_id, project_id, hit_count) VALUES (:moved, :old, 3)",
                "INSERT INTO primer (id, thought_id, project_id) VALUES (gen_random_uuid(), :moved, :old)",
                "INSERT INTO placement_proposal (id, project_id, source_id, kind, fingerprint, expires_at) "
                "VALUES (gen_random_uuid(), :old, :moved, 'lifecycle', 'f', now() + interval '1 day')",
                "UPDATE thought SET project_id = :new WHERE id = :moved",  # the move as 0025's code made it
            ):
                await connection.execute(text(statement), ids)
        await asyncio.to_thread(migrations.upgrade, scratch_url)
        async with engine.begin() as connection:
            found = sorted((kind, project) for kind, project in await connection.execute(text(followers)))
            # From now on any writer's move takes them along: SQL by hand, or a replica of 0025's release.
            await connection.execute(text("UPDATE thought SET project_id = :old WHERE id = :moved"), ids)
            back = sorted((kind, project) for kind, project in await connection.execute(text(followers)))
    finally:
        await engine.dispose()
        await asyncio.to_thread(migrations.upgrade, scratch_url)
    assert found == sorted(
        [("edge", new), ("edge", old), ("link", new), ("hit", new), ("primer", new), ("proposal", new)]
    )  # the edge from the thought that stayed stays
    assert back == sorted(
        [("edge", old), ("edge", old), ("link", old), ("hit", old), ("primer", old), ("proposal", old)]
    )


async def test_autogenerate_finds_no_drift(scratch_url: str) -> None:
    """The migrated schema and Base.metadata agree, with no filter at all.

    Alembic ≥ 1.16 reflects the generated `tsv` column (as Computed), the expression index
    `uq_edge_unordered_pair` and the pgvector type, so nothing needs excluding. What
    autogenerate does not compare (CHECK constraints, the trigger) is checked against the
    catalog in the next tests instead.
    """
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    engine = await _engine(scratch_url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_compare) == []

            # The comparison can fail: drift introduced inside the open transaction (rolled back) is seen.
            await connection.execute(text("DROP INDEX uq_edge_unordered_pair"))
            await connection.execute(text("DROP INDEX ix_thought_tags"))
            await connection.execute(text("ALTER TABLE thought ALTER COLUMN embedding_model TYPE varchar(100)"))
            drift = _flatten(await connection.run_sync(_compare))
            await connection.rollback()
            assert sorted(drift, key=str) == sorted(
                [
                    ("add_index", "edge", "uq_edge_unordered_pair"),
                    ("add_index", "thought", "ix_thought_tags"),
                    ("modify_type", "thought", "embedding_model"),
                ],
                key=str,
            )
            assert await connection.run_sync(_compare) == []
    finally:
        await engine.dispose()


async def test_autogenerate_leaves_the_project_indexes_to_the_jobs(scratch_url: str) -> None:
    """A per-project HNSW index (built by the background jobs, app.db.project_indexes) is no drift for
    alembic/env.py, which `alembic check` and `revision --autogenerate` run; unfiltered, it would be."""
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    engine = await _engine(scratch_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(project_indexes.create_statement(uuid.uuid4()).replace(" CONCURRENTLY", "")))
        async with engine.connect() as connection:
            (drift,) = _flatten(await connection.run_sync(_compare))
    finally:
        await engine.dispose()
    assert drift[0] == "remove_index" and project_indexes.is_project_index(drift[2])
    await asyncio.to_thread(command.check, migrations.alembic_config(scratch_url))  # raises on any drift


async def test_check_constraints_match_the_models(scratch_url: str) -> None:
    """Autogenerate ignores CHECK constraints, so their names are compared with the catalog here."""
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    expected = {
        str(constraint.name)
        for table in Base.metadata.sorted_tables
        for constraint in table.constraints
        if constraint.__class__.__name__ == "CheckConstraint"
    }
    engine = await _engine(scratch_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT c.conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                    "WHERE n.nspname = 'public' AND c.contype = 'c'"
                )
            )
            actual = {row[0] for row in rows}
    finally:
        await engine.dispose()
    assert "ck_thought_content_length" in expected
    assert actual == expected


async def test_index_storage_parameters_match_the_models(scratch_url: str) -> None:
    """Autogenerate ignores index storage parameters (the GIN pending lists of migration 0007, the HNSW graph),
    so the catalog's are compared with the models' here."""
    await asyncio.to_thread(migrations.upgrade, scratch_url)
    expected = {
        str(index.name): sorted(f"{key}={value}" for key, value in index.dialect_options["postgresql"]["with"].items())
        for table in Base.metadata.sorted_tables
        for index in table.indexes
        if index.dialect_options["postgresql"]["with"]
    }
    engine = await _engine(scratch_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:names)"), {"names": list(expected)}
            )
            actual = {row.relname: sorted(row.reloptions or []) for row in rows}
    finally:
        await engine.dispose()
    assert expected["ix_thought_project_tsv"] == ["gin_pending_list_limit=256"]
    assert actual == expected


# ---------------------------------------------------------------- integrity rules in the schema


def _violation(error: DBAPIError) -> tuple[str | None, str | None]:
    """(SQLSTATE, constraint name) of the driver error behind a SQLAlchemy error."""
    cause = error.orig.__cause__ if error.orig is not None else None
    return getattr(cause, "sqlstate", None), getattr(cause, "constraint_name", None)


class Schema:
    """Raw SQL writes, each in its own transaction, so a refusal leaves nothing behind."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def execute(self, sql: str, **params: Any) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(text(sql), params)

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.db.unit_of_work() as session:
            return (await session.execute(text(sql), params)).scalar_one()

    async def refused(self, sql: str, constraint: str, sqlstate: str, **params: Any) -> None:
        with pytest.raises(IntegrityError) as raised:
            await self.execute(sql, **params)
        assert _violation(raised.value) == (sqlstate, constraint), str(raised.value.orig)

    async def project(self) -> uuid.UUID:
        project_id = uuid.uuid4()
        await self.execute(
            "INSERT INTO project (id, name) VALUES (:id, :name)",
            id=project_id,
            name=f"p-{project_id.hex[:8]}",
        )
        return project_id

    async def thought(self, project_id: uuid.UUID, *, is_cluster: bool = False, content: str = "x") -> uuid.UUID:
        thought_id = uuid.uuid4()
        await self.execute(
            "INSERT INTO thought (id, project_id, content, is_cluster) VALUES (:id, :project, :content, :cluster)",
            id=thought_id,
            project=project_id,
            content=f"{content} {thought_id.hex[:6]}",
            cluster=is_cluster,
        )
        return thought_id

    async def edge(self, project_id: uuid.UUID, source: uuid.UUID, target: uuid.UUID, edge_type: str) -> None:
        await self.execute(
            "INSERT INTO edge (id, project_id, source_id, target_id, type) "
            "VALUES (:id, :project, :source, :target, CAST(:type AS edge_type))",
            id=uuid.uuid4(),
            project=project_id,
            source=source,
            target=target,
            type=edge_type,
        )

    async def edge_count(self) -> int:
        return int(await self.scalar("SELECT count(*) FROM edge"))


CHECK = "23514"
UNIQUE = "23505"


@pytest.fixture
async def schema(clean_database: Database) -> Schema:
    return Schema(clean_database)


async def test_self_loop_edge_is_refused(schema: Schema) -> None:
    project = await schema.project()
    thought = await schema.thought(project)
    await schema.refused(
        "INSERT INTO edge (id, project_id, source_id, target_id, type) VALUES (:id, :p, :t, :t, 'related')",
        "ck_edge_no_self_loop",
        CHECK,
        id=uuid.uuid4(),
        p=project,
        t=thought,
    )
    assert await schema.edge_count() == 0


async def test_one_edge_per_unordered_pair(schema: Schema) -> None:
    project = await schema.project()
    a, b, c = [await schema.thought(project) for _ in range(3)]
    await schema.edge(project, a, b, "related")
    insert = (
        "INSERT INTO edge (id, project_id, source_id, target_id, type) "
        "VALUES (:id, :p, :s, :t, CAST(:type AS edge_type))"
    )
    for source, target, edge_type in (
        (a, b, "related"),
        (a, b, "supports"),
        (b, a, "related"),
        (b, a, "parent"),
    ):
        await schema.refused(
            insert,
            "uq_edge_unordered_pair",
            UNIQUE,
            id=uuid.uuid4(),
            p=project,
            s=source,
            t=target,
            type=edge_type,
        )
    await schema.edge(project, b, c, "parent")  # another pair is fine
    assert await schema.edge_count() == 2


async def test_cluster_edge_needs_a_cluster_source(schema: Schema) -> None:
    project = await schema.project()
    cluster = await schema.thought(project, is_cluster=True)
    plain, member, other = [await schema.thought(project) for _ in range(3)]
    insert = "INSERT INTO edge (id, project_id, source_id, target_id, type) VALUES (:id, :p, :s, :t, 'cluster')"
    await schema.refused(insert, "ck_edge_cluster_source", CHECK, id=uuid.uuid4(), p=project, s=plain, t=member)
    await schema.edge(project, cluster, member, "cluster")  # a cluster thought may carry it
    # The trigger also guards updates: retyping an ordinary edge to `cluster` is refused.
    await schema.edge(project, plain, other, "related")
    await schema.refused(
        "UPDATE edge SET type = 'cluster' WHERE source_id = :s", "ck_edge_cluster_source", CHECK, s=plain
    )
    types = await schema.scalar("SELECT array_agg(type::text ORDER BY type::text) FROM edge")
    assert types == ["cluster", "related"]


async def test_content_length_is_bounded(schema: Schema) -> None:
    project = await schema.project()
    insert = "INSERT INTO thought (id, project_id, content) VALUES (:id, :p, :content)"
    await schema.execute(insert, id=uuid.uuid4(), p=project, content="x" * 720)
    await schema.refused(insert, "ck_thought_content_length", CHECK, id=uuid.uuid4(), p=project, content="x" * 721)
    await schema.refused(insert, "ck_thought_content_length", CHECK, id=uuid.uuid4(), p=project, content="")
    assert await schema.scalar("SELECT array_agg(length(content)) FROM thought") == [720]


async def test_importance_stays_within_zero_and_one(schema: Schema) -> None:
    project = await schema.project()
    insert = "INSERT INTO thought (id, project_id, content, importance) VALUES (:id, :p, :content, :importance)"
    for importance in (0.0, 1.0):
        await schema.execute(insert, id=uuid.uuid4(), p=project, content=f"ok {importance}", importance=importance)
    for importance in (-0.01, 1.01):
        await schema.refused(
            insert,
            "ck_thought_importance_range",
            CHECK,
            id=uuid.uuid4(),
            p=project,
            content=f"bad {importance}",
            importance=importance,
        )
    thought = await schema.thought(project)
    await schema.refused(
        "UPDATE thought SET importance = 1.5 WHERE id = :id", "ck_thought_importance_range", CHECK, id=thought
    )
    assert await schema.scalar("SELECT array_agg(importance ORDER BY importance) FROM thought") == [
        0.0,
        1.0,
        1.0,
    ]
