"""memory_store's writes as units of work: create, update, bulk_create, link and link_batch.

Each call embeds before its transaction (a large batch embeds inside it, overlapped with the inserts),
resolves the project, writes through StoreService and reports the soft-limit warnings. The arguments' own rules
live here too, for every door that writes a thought (the tool's handlers, the console's forms): a thought to
create as received (`new_thought`: content within the hard limit, tags, status, parent id), the fields an update
was given (`update_given`: null means not given, at least one to change) and a link's ids (`link`); each refusal
names the argument. The adapter shapes the answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.db.models import EdgeType
from app.db.records import EdgeRecord, Principal, ThoughtRecord
from app.db.repositories.projects import ProjectRepository
from app.errors import AppError, ErrorKind, bad_request
from app.ids import parse_uuid
from app.services.context import AppContext
from app.services.scope import normalize_path, resolve_write_project, scope_of
from app.services.store.edges import EdgeService
from app.services.store.thoughts import (
    EMBED_INSERT_CHUNK,
    NewThought,
    RowOutcome,
    StoreService,
    check_content,
    check_status,
    normalize_tags,
    parse_parent,
)

logger = logging.getLogger(__name__)


def soft_limit_warnings(contents: list[str], soft_limit: int) -> list[str]:
    long = [len(content) for content in contents if len(content) > soft_limit]
    if not long:
        return []
    logger.info("%d thought(s) over the %d-character soft limit", len(long), soft_limit)
    return [
        f"{len(long)} thought(s) over the {soft_limit}-character soft limit (longest {max(long)}); "
        "short thoughts recall better"
    ]


@dataclass(frozen=True)
class Written:
    """What a write answers: the rows (one for create and update), the project scope, the warnings."""

    outcomes: list[RowOutcome]
    scope: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)

    @property
    def thought(self) -> ThoughtRecord:
        thought = self.outcomes[0].thought
        assert thought is not None
        return thought


class UrlLinkFields(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def url(self) -> str: ...


class ThoughtFields(Protocol):
    """A thought to create as a door received it, its shapes already checked (memory_store create's arguments, a
    bulk_create row, the console's create form)."""

    @property
    def content(self) -> str: ...

    @property
    def tags(self) -> Sequence[str] | None: ...

    @property
    def status(self) -> str | None: ...

    @property
    def is_protected(self) -> bool: ...

    @property
    def is_global(self) -> bool: ...

    @property
    def parent_id(self) -> str | None: ...

    @property
    def url_links(self) -> Sequence[UrlLinkFields] | None: ...


def new_thought(fields: ThoughtFields, hard_limit: int, prefix: str = "") -> NewThought:
    """The checks that need the settings or the database's types; raises AppError naming the argument (`prefix`:
    a bulk_create row's `thoughts[i].`)."""
    return NewThought(
        content=check_content(fields.content, hard_limit, f"{prefix}content"),
        tags=normalize_tags(fields.tags, f"{prefix}tags"),
        status=check_status(fields.status, f"{prefix}status"),
        is_protected=fields.is_protected,
        is_global=fields.is_global,
        parent_id=parse_parent(fields.parent_id),
        url_links=[(link.text.strip(), link.url) for link in fields.url_links or []],
    )


async def create_given(app: AppContext, principal: Principal, fields: ThoughtFields, cwd: str | None) -> Written:
    """memory_store create as a door received it: `new_thought`'s checks, then `create` in the cwd's project."""
    return await create(app, principal, new_thought(fields, app.settings.content.hard_limit), cwd)


async def create(app: AppContext, principal: Principal, row: NewThought, cwd: str | None) -> Written:
    vectors = await app.embedding.embed_passages([row.content])
    model_id = app.embedding.profile.model_id if vectors and app.embedding.profile else None
    async with app.db.unit_of_work() as session:
        project, scope = await resolve_write_project(ProjectRepository(session), cwd)
        [outcome] = await StoreService(session, principal).create_many(project, [row], vectors, model_id)
        if outcome.error is not None:
            raise outcome.error
    return Written([outcome], scope, soft_limit_warnings([row.content], app.settings.content.soft_limit))


async def update_given(app: AppContext, principal: Principal, thought_id: str, given: dict[str, Any]) -> Written:
    """memory_store update as a door received it: `given` holds the fields the caller set; null means "not given" (a
    NOT NULL column must not become NULL), except surface_after, where it clears; tags_mode alone changes nothing."""
    parsed = parse_uuid(thought_id, "thought_id")
    changes = {name: value for name, value in given.items() if value is not None or name == "surface_after"}
    if not set(changes) - {"tags_mode"}:
        raise bad_request(
            "memory_store action=update needs at least one field to change: content, tags (with tags_mode), "
            "status, cwd, is_protected, is_global or surface_after"
        )
    return await update(app, principal, parsed, changes)


async def update(app: AppContext, principal: Principal, thought_id: uuid.UUID, changes: dict[str, Any]) -> Written:
    """`changes` are the given fields (null already dropped, except surface_after, where it clears)."""
    if "status" in changes:
        check_status(changes["status"])
    vector, model_id = None, None
    if "content" in changes:
        check_content(changes["content"], app.settings.content.hard_limit)
        vectors = await app.embedding.embed_passages([changes["content"]])
        if vectors and app.embedding.profile:
            vector, model_id = vectors[0], app.embedding.profile.model_id
    scope: dict[str, Any] | None = None
    async with app.db.unit_of_work() as session:
        thought = await StoreService(session, principal).update(thought_id, changes, vector, model_id)
        path = normalize_path(changes.get("cwd") or "")
        target = await ProjectRepository(session).find_for_path(path) if path else None
        if target is not None:  # a registered cwd: the thought now lives there, say so like create does
            scope = scope_of(target)
    soft_limit = app.settings.content.soft_limit
    warnings = soft_limit_warnings([changes["content"]], soft_limit) if "content" in changes else []
    return Written([RowOutcome(0, thought, None)], scope, warnings)


async def bulk_create(
    app: AppContext, principal: Principal, rows: list[NewThought | AppError], cwd: str | None
) -> Written:
    """Every row answers for itself: a refused row (an AppError) fails alone."""
    valid = [(index, row) for index, row in enumerate(rows) if isinstance(row, NewThought)]
    vectors: list[list[float] | None] | None = None
    model_id = None
    # A small batch embeds before its transaction; a large one embeds inside it, overlapped with the inserts.
    pipelined = len(valid) > EMBED_INSERT_CHUNK
    embedded = None if pipelined or not valid else await app.embedding.embed_passages([r.content for _, r in valid])
    if embedded is not None and app.embedding.profile is not None:
        vectors = [None] * len(rows)
        for (index, _), vector in zip(valid, embedded, strict=True):
            vectors[index] = vector
        model_id = app.embedding.profile.model_id
    async with app.db.unit_of_work() as session:
        project, scope = await resolve_write_project(ProjectRepository(session), cwd)
        store = StoreService(session, principal)
        outcomes = await store.create_many(project, rows, vectors, model_id, app.embedding if pipelined else None)
    warnings = soft_limit_warnings([row.content for _, row in valid], app.settings.content.soft_limit)
    return Written(outcomes, scope, warnings)


# ---------------------------------------------------------------- memory_store link, link_batch: a unit of work each


async def link_pair(
    app: AppContext, principal: Principal, source_id: uuid.UUID, target_id: uuid.UUID, edge_type: EdgeType
) -> EdgeRecord:
    async with app.db.unit_of_work() as session:
        return (await EdgeService(session, principal).link(source_id, target_id, edge_type)).edge


async def link(
    app: AppContext, principal: Principal, source_id: str, target_id: str, edge_type: EdgeType
) -> EdgeRecord:
    """memory_store link as a door received it: the two ids parsed (refused by their argument's name), then linked."""
    source, target = parse_uuid(source_id, "source_id"), parse_uuid(target_id, "target_id")
    return await link_pair(app, principal, source, target, edge_type)


@dataclass(frozen=True)
class LinkOutcome:
    index: int
    edge: EdgeRecord | None = None
    error: AppError | None = None


async def link_pairs(
    app: AppContext, principal: Principal, links: Sequence[tuple[str, str, EdgeType]]
) -> list[LinkOutcome]:
    """Every (source, target, type) as written by the caller: each fails alone (its own savepoint, its ids
    parsed as links[i].source / links[i].target); every pair lock is taken up front, in one order."""
    outcomes: list[LinkOutcome] = []
    async with app.db.unit_of_work() as session:
        service = EdgeService(session, principal)
        await service.lock_pairs(_parsed_pairs(links))  # all locks up front, in one order: no deadlock
        for index, (source, target, edge_type) in enumerate(links):
            try:
                async with session.begin_nested():  # a failing item rolls back alone
                    result = await service.link(
                        parse_uuid(source, f"links[{index}].source"),
                        parse_uuid(target, f"links[{index}].target"),
                        edge_type,
                    )
                outcomes.append(LinkOutcome(index, result.edge))
            except AppError as error:
                if error.kind is ErrorKind.forbidden:  # a role refusal refuses the call (nothing written), not a row
                    raise
                outcomes.append(LinkOutcome(index, error=error))
    return outcomes


def _parsed_pairs(links: Sequence[tuple[str, str, EdgeType]]) -> list[tuple[uuid.UUID, uuid.UUID]]:
    pairs = []
    for source, target, _ in links:
        try:
            pairs.append((parse_uuid(source, "source"), parse_uuid(target, "target")))
        except AppError:
            continue  # reported by its own row
    return pairs
