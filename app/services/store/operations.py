"""memory_store's writes as units of work: create, update, bulk_create, link and link_batch.

Each call embeds before its transaction (a large batch embeds inside it, overlapped with the inserts),
resolves the project, writes through StoreService and reports the soft-limit warnings. The adapter turns
arguments into NewThought rows and shapes the answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.db.models import EdgeType
from app.db.records import EdgeRecord, Principal, ThoughtRecord
from app.db.repositories.projects import ProjectRepository
from app.errors import AppError, ErrorKind
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


async def create(app: AppContext, principal: Principal, row: NewThought, cwd: str | None) -> Written:
    vectors = await app.embedding.embed_passages([row.content])
    model_id = app.embedding.profile.model_id if vectors and app.embedding.profile else None
    async with app.db.unit_of_work() as session:
        project, scope = await resolve_write_project(ProjectRepository(session), cwd)
        [outcome] = await StoreService(session, principal).create_many(project, [row], vectors, model_id)
        if outcome.error is not None:
            raise outcome.error
    return Written([outcome], scope, soft_limit_warnings([row.content], app.settings.content.soft_limit))


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
