"""Writing thoughts: create, update and bulk_create (one transaction, per-row results)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EdgeType, ThoughtStatus
from app.db.records import Principal, ProjectRecord, ThoughtRecord
from app.db.repositories.claims import ContentClaimRepository
from app.db.repositories.edges import EdgeRepository
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.thoughts import ThoughtRepository, content_md5
from app.db.repositories.url_links import UrlLinkRepository
from app.embedding.runtime import EmbeddingRuntime
from app.errors import AppError, invalid, not_found
from app.formats import MAX_TAGS
from app.ids import new_id, parse_uuid
from app.services.admin.membership import require_role, require_thought_roles
from app.services.scope import normalize_path

logger = logging.getLogger(__name__)

ARCHIVE_REFUSAL = (
    "status 'archived' is not accepted here: archiving is destructive and has one path — call "
    "memory_supersede action=archive with thought_id (it previews), then repeat with confirm=true and the "
    "returned preview_token"
)
# A missing parent's reason, without the id a form's field already shows.
_NO_PARENT = "no thought of this id was found"


@dataclass(frozen=True)
class NewThought:
    """A validated thought to create (content and tags already normalised)."""

    content: str
    tags: list[str] = field(default_factory=list)
    status: ThoughtStatus = ThoughtStatus.active
    is_protected: bool = False
    is_global: bool = False
    parent_id: uuid.UUID | None = None
    url_links: list[tuple[str, str]] = field(default_factory=list)
    surface_after: datetime | None = None


@dataclass(frozen=True)
class RowOutcome:
    index: int
    thought: ThoughtRecord | None = None
    error: AppError | None = None


def normalize_tags(tags: Sequence[str] | None, argument: str = "tags") -> list[str]:
    """Trimmed, non-empty, unique case-insensitively (first spelling wins)."""
    seen: set[str] = set()
    result: list[str] = []
    for raw in tags or []:
        tag = raw.strip()
        if not tag:
            raise invalid(argument, "tags must be non-empty strings")
        if tag.lower() not in seen:
            seen.add(tag.lower())
            result.append(tag)
    return result


def check_content(content: str, hard_limit: int, argument: str = "content") -> str:
    if not content or not content.strip():
        raise invalid(argument, "content must not be empty")
    if len(content) > hard_limit:
        raise invalid(
            argument,
            f"{len(content)} characters is over the {hard_limit}-character limit — "
            "split it into several thoughts and link them",
        )
    return content


def check_status(status: str | None, argument: str = "status") -> ThoughtStatus:
    if status is None:
        return ThoughtStatus.active
    if status == ThoughtStatus.archived:
        raise invalid(argument, ARCHIVE_REFUSAL)
    return ThoughtStatus(status)


# Rows per INSERT when bulk_create embeds inside its transaction (one chunk embeds while the last is written).
EMBED_INSERT_CHUNK = 250
# The last chunk's INSERT overlaps nothing: the remainder is halved down to chunks of at most this many rows.
EMBED_INSERT_TAIL = 32


def insert_chunk_sizes(count: int) -> list[int]:
    """Full chunks, then a halving tail: 1000 rows → 250, 250, 250, 125, 63, 31, 31; 251 → 126, 63, 31, 31."""
    sizes: list[int] = []
    while count > 2 * EMBED_INSERT_CHUNK:
        sizes.append(EMBED_INSERT_CHUNK)
        count -= EMBED_INSERT_CHUNK
    while count > EMBED_INSERT_TAIL:
        half = -(-count // 2)
        sizes.append(half)
        count -= half
    if count:
        sizes.append(count)
    return sizes


class StoreService:
    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.thoughts = ThoughtRepository(session)
        self.projects = ProjectRepository(session)

    async def create_many(
        self,
        project: ProjectRecord,
        rows: Sequence[NewThought | AppError],
        vectors: Sequence[list[float] | None] | None,
        model_id: str | None,
        embedding: EmbeddingRuntime | None = None,
    ) -> list[RowOutcome]:
        """Insert the valid rows in one go; an invalid row (an AppError) becomes a failed outcome.

        A row whose exact content already lives (draft/active) in the project answers that
        thought, with the tags merged, instead of creating a duplicate. Without `vectors`, `embedding`
        embeds the rows to insert chunk by chunk while the previous chunk is written.
        """
        await require_role(self.session, [project.id])
        valid = [row for row in rows if isinstance(row, NewThought)]
        # Parents are locked against deletion as they are checked; live duplicates also against updates, since
        # their tags are merged read-modify-write (a concurrent merge waits, then reads ours).
        # A parent edge belongs to the parent's project (its source): the caller needs the role there too, and a
        # parent they may only read refuses the call, as `link` from it would (nothing written, for batches too).
        parents = await require_thought_roles(
            self.session, [row.parent_id for row in valid if row.parent_id], lock="key share"
        )
        duplicates = await self.thoughts.find_live_by_content(
            project.id, [row.content for row in valid], lock="no key update"
        )
        new_contents = [
            row.content
            for row in valid
            if row.content not in duplicates and (row.parent_id is None or row.parent_id in parents)
        ]
        fresh_ids, claimed = await self._claim(project.id, new_contents)
        duplicates.update(claimed)
        existing = {content: t.id for content, t in duplicates.items()}
        existing_tags = {t.id: list(t.tags) for t in duplicates.values()}
        original_tags = {thought_id: list(tags) for thought_id, tags in existing_tags.items()}
        results: list[uuid.UUID | AppError] = []
        inserts: list[dict[str, Any]] = []
        pending: dict[uuid.UUID, dict[str, Any]] = {}
        edges: list[dict[str, Any]] = []
        links: list[dict[str, Any]] = []
        for index, row in enumerate(rows):
            if isinstance(row, AppError):
                results.append(row)
            elif row.parent_id is not None and row.parent_id not in parents:
                results.append(
                    not_found(f"parent_id {row.parent_id} not found", argument="parent_id", reason=_NO_PARENT)
                )
            elif row.content in existing:
                thought_id = existing[row.content]
                live = thought_id in existing_tags  # else a repeat of a row inserted earlier in this batch
                current = existing_tags[thought_id] if live else pending[thought_id]["tags"]
                merged = normalize_tags([*current, *row.tags])
                if len(merged) > MAX_TAGS:
                    results.append(too_many_tags(len(merged), f"merging these into thought {thought_id}"))
                    continue
                if live:
                    existing_tags[thought_id] = merged
                else:  # merge into its pending insert
                    pending[thought_id]["tags"] = merged
                results.append(thought_id)
            else:
                thought_id = fresh_ids[row.content]
                existing[row.content] = thought_id
                vector = vectors[index] if vectors is not None else None
                pending[thought_id] = self._insert_values(thought_id, project, row, vector, model_id)
                inserts.append(pending[thought_id])
                if row.parent_id is not None:
                    edges.append(self._parent_edge(row.parent_id, thought_id, parents[row.parent_id]))
                links.extend(self._link_values(thought_id, project.id, row.url_links))
                results.append(thought_id)
        if vectors is None and embedding is not None:
            inserted = await self._embed_and_insert(inserts, embedding, project.name)
        else:
            inserted = await self.thoughts.insert_returning(inserts, project.name)
        await EdgeRepository(self.session).insert_many(edges)
        await UrlLinkRepository(self.session).insert_many(links)
        for thought_id, tags in existing_tags.items():
            if tags != original_tags[thought_id]:
                await self.thoughts.update_fields(thought_id, {"tags": tags})
        records = {record.id: record for record in inserted}
        records.update(await self.thoughts.get_many(list(existing_tags)))
        return [
            RowOutcome(index, thought=records[result])
            if isinstance(result, uuid.UUID)
            else RowOutcome(index, error=result)
            for index, result in enumerate(results)
        ]

    async def _claim(
        self, project_id: uuid.UUID, contents: Sequence[str]
    ) -> tuple[dict[str, uuid.UUID], dict[str, ThoughtRecord]]:
        """New ids for the contents to create, claimed against concurrent creates of the same content.

        A content another call claimed first is waited for; if its thought is live once that call commits,
        it is a duplicate like any other (answered, tags merged: the second part of the answer). A claim
        whose thought is no longer live (archived, edited, deleted) passes to the new thought.
        """
        unique = list(dict.fromkeys(contents))
        fresh = {content: new_id() for content in unique}  # in row order: ids grow with time, as the rows do
        by_md5 = {content_md5(content): content for content in unique}
        claims = ContentClaimRepository(self.session)
        taken = await claims.claim(project_id, {md5: fresh[content] for md5, content in by_md5.items()})
        if not taken:
            return fresh, {}
        await claims.lock(project_id, taken)  # one take-over at a time: a second one waits, then finds ours live
        taken_contents = [by_md5[md5] for md5 in taken]
        live = await self.thoughts.find_live_by_content(project_id, taken_contents, lock="no key update")
        await claims.take_over(project_id, {md5: fresh[by_md5[md5]] for md5 in taken if by_md5[md5] not in live})
        for content in live:
            del fresh[content]
        return fresh, live

    async def update(
        self, thought_id: uuid.UUID, changes: dict[str, Any], vector: list[float] | None, model_id: str | None
    ) -> ThoughtRecord:
        current = await self.thoughts.get(thought_id, for_update=True)
        if current is None:
            raise not_found(f"Thought {thought_id} not found")
        await require_role(self.session, [current.project_id])
        values: dict[str, Any] = {}
        if "content" in changes:
            values["content"] = changes["content"]
            values["embedding"] = vector
            values["embedding_model"] = model_id if vector is not None else None
        if "tags" in changes:
            values["tags"] = _apply_tags(current.tags, changes["tags"], changes.get("tags_mode") or "replace")
        if "status" in changes:
            status = check_status(changes["status"])
            values["status"] = status
            values["archived_at"] = None
        for name in ("is_protected", "is_global", "surface_after"):
            if name in changes:
                values[name] = changes[name]
        project_id = await self._project_for(changes["cwd"], current.project_id) if "cwd" in changes else None
        if project_id is not None and project_id != current.project_id:  # Citus refuses even a same-value write
            values["project_id"] = project_id
            await require_role(self.session, [project_id])  # moving it writes into that project too
        if values:
            await self.thoughts.update_fields(thought_id, values)
        updated = await self.thoughts.get(thought_id)
        assert updated is not None
        return updated

    async def _embed_and_insert(
        self, inserts: list[dict[str, Any]], embedding: EmbeddingRuntime, project_name: str
    ) -> list[ThoughtRecord]:
        chunks: list[list[dict[str, Any]]] = []
        start = 0
        for size in insert_chunk_sizes(len(inserts)):
            chunks.append(inserts[start : start + size])
            start += size
        texts = [[row["content"] for row in chunk] for chunk in chunks]
        inserted: list[ThoughtRecord] = []
        index = 0
        async for vectors in embedding.embed_chunks(texts):
            chunk = chunks[index]
            index += 1
            profile = embedding.profile
            if vectors is not None and profile is not None:
                for row, vector in zip(chunk, vectors, strict=True):
                    row["embedding"], row["embedding_model"] = vector, profile.model_id
            inserted.extend(await self.thoughts.insert_returning(chunk, project_name))
        return inserted

    async def _project_for(self, cwd: str | None, fallback: uuid.UUID) -> uuid.UUID:
        path = normalize_path(cwd or "")
        project = await self.projects.find_for_path(path) if path else None
        return project.id if project else fallback

    def _insert_values(
        self,
        thought_id: uuid.UUID,
        project: ProjectRecord,
        row: NewThought,
        vector: list[float] | None,
        model_id: str | None,
    ) -> dict[str, Any]:
        return {
            "id": thought_id,
            "project_id": project.id,
            "content": row.content,
            "status": row.status,
            "tags": row.tags,
            "is_protected": row.is_protected,
            "is_global": row.is_global,
            "surface_after": row.surface_after,
            "created_by": self.principal.user_id,
            "embedding": vector,
            "embedding_model": model_id if vector is not None else None,
        }

    def _parent_edge(self, parent_id: uuid.UUID, child_id: uuid.UUID, project_id: uuid.UUID) -> dict[str, Any]:
        # parent → child: the source of a parent edge is the parent (docs/mcp-tools.md, action=create), and the
        # edge lives in the parent's project, as every edge lives in its source's (EdgeService.link).
        return {
            "id": new_id(),
            "project_id": project_id,
            "source_id": parent_id,
            "target_id": child_id,
            "type": EdgeType.parent,
            "created_by": self.principal.user_id,
        }

    @staticmethod
    def _link_values(
        thought_id: uuid.UUID, project_id: uuid.UUID, url_links: list[tuple[str, str]]
    ) -> list[dict[str, Any]]:
        return [
            {
                "id": new_id(),
                "thought_id": thought_id,
                "project_id": project_id,
                "text": text,
                "url": url,
                "label": text,
                "sort_order": order,
            }
            for order, (text, url) in enumerate(url_links)
        ]


def too_many_tags(count: int, how: str) -> AppError:
    """The argument's bound, kept by a thought too: repeated adds or merges would grow it without one."""
    return invalid(
        "tags",
        f"a thought carries at most {MAX_TAGS} tags; {how} makes {count} — "
        "remove some first (tags_mode=remove) or replace the set",
    )


def _apply_tags(current: Sequence[str], tags: Sequence[str], mode: str) -> list[str]:
    incoming = normalize_tags(tags)
    if mode == "add":
        added = normalize_tags([*current, *incoming])
        if len(added) > MAX_TAGS:  # the argument's bound, kept by the thought too (else repeated adds grow it)
            raise too_many_tags(len(added), "adding these")
        return added
    if mode == "remove":
        removed = {tag.lower() for tag in incoming}
        return [tag for tag in current if tag.lower() not in removed]
    return incoming


def parse_parent(value: str | None) -> uuid.UUID | None:
    return parse_uuid(value, "parent_id") if value else None
