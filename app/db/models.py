"""ORM models: the whole data model (docs/ARCHITECTURE.md, "Data model"). Alembic owns the schema built from these.

Every table that grows with use carries project_id so it can be distributed by project later.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    func,
    literal_column,
)
from sqlalchemy import (
    text as sql,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.db.graphs import SHARED_GRAPH, SHARED_INDEX
from app.db.vector import EMBEDDING_DIM, EmbeddingVector, half

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class ThoughtStatus(enum.StrEnum):
    draft = "draft"
    active = "active"
    archived = "archived"


class EdgeType(enum.StrEnum):
    related = "related"
    parent = "parent"
    develops = "develops"
    replaces = "replaces"
    cluster = "cluster"
    references = "references"
    depends_on = "depends_on"
    contradicts = "contradicts"
    supports = "supports"


GIN_PENDING_LIST = {"gin_pending_list_limit": 256}  # kB

SYMMETRIC_EDGE_TYPES = frozenset({EdgeType.related, EdgeType.contradicts})


class Role(enum.StrEnum):
    admin = "admin"
    writer = "writer"
    reader = "reader"


class ProposalStatus(enum.StrEnum):
    pending = "pending"
    accepted = "accepted"
    rejected = "rejected"
    expired = "expired"
    stale = "stale"
    rolled_back = "rolled_back"


def _enum(cls: type[enum.Enum], name: str) -> Enum:
    return Enum(cls, name=name, values_callable=lambda members: [m.value for m in members])


def _uuid_pk() -> Mapped[uuid.UUID]:
    return mapped_column(UUID(as_uuid=True), primary_key=True)


def _created_at() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class AppUser(Base):
    __tablename__ = "app_user"
    id: Mapped[uuid.UUID] = _uuid_pk()
    name: Mapped[str] = mapped_column(String(200), nullable=False, unique=True)
    role: Mapped[Role] = mapped_column(_enum(Role, "user_role"), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    # `scrypt$n$r$p$salt$hash` (app.services.auth.passwords.hash_password), set by an admin; NULL = no password sign-in.
    password_hash: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (CheckConstraint("length(btrim(name)) > 0", name="name_not_blank"),)


class ApiToken(Base):
    __tablename__ = "api_token"
    id: Mapped[uuid.UUID] = _uuid_pk()
    user_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"), nullable=False, index=True
    )
    token_hash: Mapped[bytes] = mapped_column(LargeBinary(32), nullable=False, unique=True)
    label: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = _created_at()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # batched, app.services.auth.tokens
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # NULL = never (migration 0010: the tokens from before it keep working); checked on every request.
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ConsoleSession(Base):
    """One console sign-in (app.services.auth.sessions, migration 0018): the cookie carries a random secret, this row
    its SHA-256, so signing out, an admin, a revoked token, a demotion or a new password ends it on the server
    and a replayed cookie is refused. Not project data: the visibility rule has nothing to scope here."""

    __tablename__ = "console_session"
    id: Mapped[uuid.UUID] = _uuid_pk()
    secret_hash: Mapped[bytes] = mapped_column(LargeBinary(32), nullable=False, unique=True)
    user_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"), nullable=False, index=True
    )
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # token, password, upstream: how it signed in
    # The API token a token sign-in used: the session lives while it does.
    token_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("api_token.id", ondelete="CASCADE"), index=True
    )
    # SHA-256 of the stored password hash a password sign-in matched: the session lives while it is the stored one.
    password_mark: Mapped[bytes | None] = mapped_column(LargeBinary(32))
    created_at: Mapped[datetime] = _created_at()
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_reason: Mapped[str | None] = mapped_column(String(32))  # sign_out, admin, token_revoke, role, password
    __table_args__ = (
        CheckConstraint("kind IN ('token', 'password', 'upstream')", name="known_kind"),
        CheckConstraint(
            "(kind = 'token') = (token_id IS NOT NULL) AND (kind = 'password') = (password_mark IS NOT NULL)",
            name="credential_of_kind",
        ),
        Index("ix_console_session_expires_at", "expires_at"),
    )


class Project(Base):
    __tablename__ = "project"
    id: Mapped[uuid.UUID] = _uuid_pk()
    name: Mapped[str] = mapped_column(String(200), nullable=False, unique=True)
    local_path: Mapped[str | None] = mapped_column(Text, unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    is_default: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=sql("false"))
    # Live thoughts and when they were counted, by the background jobs (migration 0008): the vector leg's
    # exact-or-HNSW choice.
    thought_estimate: Mapped[int] = mapped_column(Integer, nullable=False, server_default=sql("0"))
    thought_estimate_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()
    __table_args__ = (
        CheckConstraint("length(btrim(name)) > 0", name="name_not_blank"),
        Index("uq_project_single_default", "is_default", unique=True, postgresql_where=sql("is_default")),
    )


class ProjectMember(Base):
    """Who may see and change a project, and with which role there (migration 0017); `user_id` NULL is
    everyone. A caller's role in a project is the lower of their global role and their strongest row here
    (their own or everyone's); a project without a row for them is invisible to them (app.db.visibility).
    Every project gets an everyone row with role `admin` when it is inserted (trigger
    `project_open_to_everyone`, and app.db.repositories.projects where Citus cannot run the trigger), so a
    project is open until an admin removes that row."""

    __tablename__ = "project_member"
    id: Mapped[uuid.UUID] = _uuid_pk()
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[Role] = mapped_column(_enum(Role, "user_role"), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    __table_args__ = (
        Index(
            "uq_project_member_project_user", "project_id", "user_id", unique=True, postgresql_nulls_not_distinct=True
        ),
    )


# The text-search configuration of `tsv` (and so of every BM25 lexeme: queries are parsed with it too).
TEXT_SEARCH_CONFIG = "english"
# A thought whose stored content facts (`lexemes`, `content_md5`) are missing or disagree with its content. `IS TRUE`
# (the disjunction is never NULL): a test of one expression, which the planner estimates from the statistics object
# `thought_content_facts_stale` on it (migration 0024) — as the disjunction itself it guessed ~40 % of the rows and
# read the whole heap instead of the partial index.
CONTENT_FACTS_DIFFER = "lexemes IS DISTINCT FROM length(tsv) OR content_md5 IS DISTINCT FROM md5(content)::uuid"
CONTENT_FACTS_STALE = f"({CONTENT_FACTS_DIFFER}) IS TRUE"
SHORT_CONTENT = 10  # characters once trimmed: the health check too_short_content
IMPORTANCE_INDEX = "ix_thought_importance_brin"


class Thought(Base):
    __tablename__ = "thought"
    id: Mapped[uuid.UUID] = _uuid_pk()
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="RESTRICT"), nullable=False
    )
    content: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[ThoughtStatus] = mapped_column(
        _enum(ThoughtStatus, "thought_status"), nullable=False, server_default="active"
    )
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=sql("'{}'::text[]"))
    is_protected: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=sql("false"))
    is_global: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=sql("false"))
    is_cluster: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=sql("false"))
    importance: Mapped[float] = mapped_column(Float, nullable=False, server_default=sql("1.0"))
    surface_after: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()
    embedding: Mapped[Any] = mapped_column(EmbeddingVector(EMBEDDING_DIM), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200))
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed(f"to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, content)", persisted=True)
    )
    # Facts of the content the health report reads from indexes instead of the heap (migration 0024): length(tsv)
    # and md5(content). Plain columns, not generated ones: adding a stored generated column rewrites the table under
    # its lock. Written with the content (app.db.repositories.thoughts); NULL until the migration's backfill reached
    # the row. Every row whose facts are missing or disagree with its content is in ix_thought_content_facts_stale,
    # which PostgreSQL keeps for every writer, so the report corrects them exactly (app.services.status.health).
    lexemes: Mapped[int | None] = mapped_column(Integer)
    content_md5: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    __table_args__ = (
        CheckConstraint("length(content) > 0 AND length(content) <= 720", name="content_length"),
        CheckConstraint("importance >= 0 AND importance <= 1", name="importance_range"),
        CheckConstraint("(status = 'archived') = (archived_at IS NOT NULL)", name="archived_at_matches_status"),
        CheckConstraint("(embedding IS NULL) = (embedding_model IS NULL)", name="embedding_has_model"),
        # The range of a time a caller sends (app.formats; migration 0019): every read can format it.
        CheckConstraint(
            "surface_after >= '1970-01-01 00:00:00+00' AND surface_after <= '9999-12-31 23:59:59.999+00'",
            name="surface_after_range",
        ),
        # is_global included (migration 0021): the visibility rule's filter (project visible OR global) can be
        # checked in the index, so a count of a scope is index-only instead of reading every row's heap page.
        Index(
            "ix_thought_project_status_created",
            "project_id",
            "status",
            "created_at",
            postgresql_include=["is_global"],
        ),
        # Newest first in a project, and across every project (migration 0015): a timeline or list page of any
        # status reads its rows in order instead of sorting the whole scope (at 100 k thoughts ~150 ms → ~1 ms).
        Index("ix_thought_project_created", "project_id", "created_at", "id"),
        # The protected thoughts of a project, newest first (migration 0021): the console's browse by standing.
        Index(
            "ix_thought_project_protected_created",
            "project_id",
            "created_at",
            "id",
            postgresql_where=sql("is_protected"),
        ),
        Index("ix_thought_created", "created_at", "id"),
        # GIN pending lists of 256 kB (migration 0007): every scan reads the whole list.
        Index("ix_thought_tags", "tags", postgresql_using="gin", postgresql_with=GIN_PENDING_LIST),
        # btree_gin (migration 0003): the lexical leg's project filter and words in one index scan.
        Index("ix_thought_project_tsv", "project_id", "tsv", postgresql_using="gin", postgresql_with=GIN_PENDING_LIST),
        # Half precision (migration 0005) at app.db.graphs.SHARED_GRAPH's parameters (migration 0023): why, there.
        # Queries order by app.db.vector.index_distance.
        Index(
            SHARED_INDEX,
            half(literal_column("embedding")).label("embedding_half"),
            postgresql_using="hnsw",
            postgresql_with=SHARED_GRAPH.options(),
            postgresql_ops={"embedding_half": "halfvec_cosine_ops"},
        ),
        Index("ix_thought_pending_embedding", "id", postgresql_where=sql("embedding IS NULL")),
        # Duplicate-content lookups of store/bulk_create (a whole content may exceed a btree entry).
        Index("ix_thought_project_content_md5", "project_id", sql("md5(content)")),
        # The health report (migration 0024), each read index-only. Every thought's project, content hash, status
        # and lexemes: the counts by project and status, the BM25 drift's lexemes, duplicate content's candidates.
        Index(
            "ix_thought_project_content_facts",
            "project_id",
            "content_md5",
            postgresql_include=["status", "is_global", "is_cluster", "lexemes"],
        ),
        # The rows whose facts are missing or stale (empty once backfilled, unless written around the repository).
        Index("ix_thought_content_facts_stale", "id", postgresql_where=sql(CONTENT_FACTS_STALE)),
        # A thought by id with what the visibility rule and the edge checks ask of it: each end of every edge.
        Index("ix_thought_id_facts", "id", postgresql_include=["project_id", "is_global", "status", "is_cluster"]),
        # The row checks' few rows: untagged and too-short thoughts.
        Index(
            "ix_thought_untagged",
            "id",
            postgresql_include=["project_id", "is_global", "status"],
            postgresql_where=sql("cardinality(tags) = 0"),
        ),
        Index(
            "ix_thought_short_content",
            "id",
            postgresql_include=["project_id", "is_global", "status"],
            postgresql_where=sql(f"length(btrim(content)) < {SHORT_CONTENT}"),
        ),
        # The drafts by age, with what stale_drafts asks of them.
        Index(
            "ix_thought_drafts_created",
            "created_at",
            postgresql_include=["id", "project_id", "is_global", "surface_after"],
            postgresql_where=sql("status = 'draft'"),
        ),
        # importance_outliers: a summarizing index, so the importance decay's updates stay HOT (PostgreSQL 16+; on 15
        # migration 0024 leaves it out, as any index on importance would make every decayed row insert into every
        # index). It narrows the scan where importance follows the rows' order (it falls with age), which the
        # planner judges from the column's correlation; otherwise the check reads the heap, as before.
        Index(
            IMPORTANCE_INDEX,
            "importance",
            postgresql_using="brin",
            postgresql_with={"autosummarize": "on"},
        ),
    )


class LexicalCorpus(Base):
    """A project's BM25 corpus: how many thoughts it holds and how many lexeme occurrences their tsvectors
    carry (every status). Kept by the triggers of migration 0009 in the writing transaction."""

    __tablename__ = "lexical_corpus"
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), primary_key=True
    )
    thoughts: Mapped[int] = mapped_column(BigInteger, nullable=False)
    tokens: Mapped[int] = mapped_column(BigInteger, nullable=False)


class LexicalTerm(Base):
    """A lexeme's document frequency in a project (rows of zero are deleted). Keyed lexeme first, so one index
    serves a project's frequencies and the sum over every project (an unscoped search)."""

    __tablename__ = "lexical_term"
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), primary_key=True
    )
    thoughts: Mapped[int] = mapped_column(Integer, nullable=False)


class Edge(Base):
    __tablename__ = "edge"
    id: Mapped[uuid.UUID] = _uuid_pk()
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    source_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), nullable=False, index=True
    )
    target_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), nullable=False, index=True
    )
    type: Mapped[EdgeType] = mapped_column(_enum(EdgeType, "edge_type"), nullable=False)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _created_at()
    __table_args__ = (
        CheckConstraint("source_id <> target_id", name="no_self_loop"),
        # One edge per unordered pair, whatever its type or direction.
        Index(
            "uq_edge_unordered_pair",
            sql("LEAST(source_id, target_id)"),
            sql("GREATEST(source_id, target_id)"),
            unique=True,
        ),
    )


class ThoughtUrlLink(Base):
    __tablename__ = "thought_url_link"
    id: Mapped[uuid.UUID] = _uuid_pk()
    thought_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), nullable=False, index=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    text: Mapped[str] = mapped_column(Text, nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    label: Mapped[str] = mapped_column(Text, nullable=False)
    sort_order: Mapped[int] = mapped_column(Integer, nullable=False, server_default=sql("0"))
    created_at: Mapped[datetime] = _created_at()
    __table_args__ = (
        CheckConstraint("url ~* '^https?://'", name="url_is_http"),
        CheckConstraint("length(btrim(text)) > 0", name="text_not_blank"),
    )


class ThoughtHit(Base):
    __tablename__ = "thought_hit"
    thought_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    hit_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default=sql("0"))
    last_hit_at: Mapped[datetime] = _created_at()
    __table_args__ = (CheckConstraint("hit_count >= 0", name="hit_count_positive"),)


class ContentClaim(Base):
    """Which new thought claimed a (project, content): the unique key that makes concurrent creates of one
    content queue behind each other. Only create paths write it, so it is a hint: its thought may have been
    archived, edited, moved or deleted since (docs/mcp-tools.md, memory_store action=create: a live duplicate is
    what counts)."""

    __tablename__ = "thought_content_claim"
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), primary_key=True
    )
    content_md5: Mapped[str] = mapped_column(Text, primary_key=True)
    thought_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)


class Primer(Base):
    __tablename__ = "primer"
    id: Mapped[uuid.UUID] = _uuid_pk()
    thought_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), nullable=False, unique=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    promoted_at: Mapped[datetime] = _created_at()
    created_at: Mapped[datetime] = _created_at()


class Slot(Base):
    __tablename__ = "slot"
    id: Mapped[uuid.UUID] = _uuid_pk()
    project_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    updated_at: Mapped[datetime] = _created_at()
    __table_args__ = (
        CheckConstraint("name IN ('project_context', 'active_goals')", name="stored_slot_name"),
        Index("uq_slot_project_name", "project_id", "name", unique=True, postgresql_nulls_not_distinct=True),
    )


class PreviewToken(Base):
    __tablename__ = "preview_token"
    id: Mapped[uuid.UUID] = _uuid_pk()
    user_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"))
    tool: Mapped[str] = mapped_column(String(64), nullable=False)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    fingerprint: Mapped[str] = mapped_column(String(128), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (Index("ix_preview_token_expires_at", "expires_at"),)


class PlacementProposal(Base):
    __tablename__ = "placement_proposal"
    id: Mapped[uuid.UUID] = _uuid_pk()
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("project.id", ondelete="CASCADE"), nullable=False
    )
    source_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE"), nullable=False, index=True
    )
    target_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("thought.id", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    edge_type: Mapped[EdgeType | None] = mapped_column(_enum(EdgeType, "edge_type"))
    status: Mapped[ProposalStatus] = mapped_column(
        _enum(ProposalStatus, "proposal_status"), nullable=False, server_default="pending"
    )
    confidence: Mapped[float | None] = mapped_column(Float)
    rationale: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=sql("'{}'::jsonb"))
    fingerprint: Mapped[str] = mapped_column(String(128), nullable=False)
    run_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), index=True)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()
    applied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    __table_args__ = (
        CheckConstraint(
            "kind IN ('edge', 'placement', 'lifecycle', 'triage_activate', 'triage_archive')",
            name="known_kind",
        ),
        Index(
            "uq_placement_proposal_pending",
            "source_id",
            "kind",
            "target_id",
            "edge_type",
            unique=True,
            postgresql_where=sql("status = 'pending'"),
            postgresql_nulls_not_distinct=True,
        ),
        Index("ix_placement_proposal_project_status", "project_id", "status", "created_at"),
    )


class AuditEvent(Base):
    __tablename__ = "audit_event"
    id: Mapped[uuid.UUID] = _uuid_pk()
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="SET NULL")
    )
    project_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    tool: Mapped[str] = mapped_column(String(64), nullable=False)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    target_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=sql("'{}'::text[]"))
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=sql("'{}'::jsonb"))
    created_at: Mapped[datetime] = _created_at()
    __table_args__ = (Index("ix_audit_event_created_at", "created_at"),)


class JobRun(Base):
    """The last run of each background job (app.services.jobs.background): one row per job, upserted by the replica that
    ran it, so every replica's operations page shows it (migration 0014). Not written when a job found nothing due
    or another replica held its lock."""

    __tablename__ = "job_run"
    job: Mapped[str] = mapped_column(String(100), primary_key=True)
    replica: Mapped[str] = mapped_column(String(200), nullable=False)  # host:pid of the process that ran it
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    succeeded: Mapped[bool] = mapped_column(Boolean, nullable=False)
    outcome: Mapped[str] = mapped_column(Text, nullable=False)  # what it did, or the error
    last_succeeded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class HealthReport(Base):
    """The last stored health report (app.services.status.health_reports): one row, replaced by the background job every
    `health.report_interval_minutes` and by an admin's Check now, so the console's health page reads it instead of
    running every check (migration 0016). The MCP action and GET /api/health-check still check live."""

    __tablename__ = "health_report"
    one: Mapped[bool] = mapped_column(Boolean, primary_key=True, default=True)  # the only row
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)  # the database's clock
    seconds: Mapped[float] = mapped_column(Float, nullable=False)  # how long the checks took
    replica: Mapped[str] = mapped_column(String(200), nullable=False)  # host:pid of the process that ran them
    requested_by: Mapped[str | None] = mapped_column(String(200))  # the admin who asked; NULL: the background job
    # memory_status action=health include_details=true's report; json, not jsonb, so its categories and checks keep
    # the report's order (jsonb sorts an object's keys)
    report: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    __table_args__ = (CheckConstraint("one", name="one_row"),)


class OAuthClient(Base):
    """A client registered by RFC 7591 dynamic registration: its metadata, and its secret's SHA-256 if any."""

    __tablename__ = "oauth_client"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # the client_id handed to the client
    secret_hash: Mapped[bytes | None] = mapped_column(LargeBinary(32))  # NULL: a public client (PKCE only)
    client_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False)
    created_at: Mapped[datetime] = _created_at()


class OAuthAuthorization(Base):
    """One authorization request from /authorize to its code's exchange (app.services.auth.oauth).

    Created by /authorize (the sign-in page finds it by `request_hash`), bound to a user at sign-in, given a
    code at consent, marked used by the token exchange: each step is one row update, so any replica serves it.
    """

    __tablename__ = "oauth_authorization"
    id: Mapped[uuid.UUID] = _uuid_pk()
    client_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("oauth_client.id", ondelete="CASCADE"), nullable=False, index=True
    )
    request_hash: Mapped[bytes] = mapped_column(LargeBinary(32), nullable=False, unique=True)
    consent_hash: Mapped[bytes | None] = mapped_column(LargeBinary(32))  # the signed-in browser's consent secret
    code_hash: Mapped[bytes | None] = mapped_column(LargeBinary(32), unique=True)
    user_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"))
    role: Mapped[Role | None] = mapped_column(_enum(Role, "user_role"))
    code_challenge: Mapped[str] = mapped_column(String(128), nullable=False)  # S256 only (the SDK refuses plain)
    redirect_uri: Mapped[str] = mapped_column(Text, nullable=False)
    redirect_uri_explicit: Mapped[bool] = mapped_column(Boolean, nullable=False)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=sql("'{}'::text[]"))
    resource: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (Index("ix_oauth_authorization_expires_at", "expires_at"),)


class OAuthToken(Base):
    """Access and refresh tokens (SHA-256 only). One `family_id` per code exchange: a refresh rotates within
    it (`parent_id` = the refresh token it replaced), revocation and a replayed refresh token end all of it."""

    __tablename__ = "oauth_token"
    id: Mapped[uuid.UUID] = _uuid_pk()
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    token_hash: Mapped[bytes] = mapped_column(LargeBinary(32), nullable=False, unique=True)
    client_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("oauth_client.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("app_user.id", ondelete="CASCADE"), nullable=False, index=True
    )
    role: Mapped[Role] = mapped_column(_enum(Role, "user_role"), nullable=False)  # granted at consent
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=sql("'{}'::text[]"))
    resource: Mapped[str] = mapped_column(Text, nullable=False)
    family_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, index=True)
    parent_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("oauth_token.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # a refresh token, once rotated
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        CheckConstraint("kind IN ('access', 'refresh')", name="known_kind"),
        Index("ix_oauth_token_expires_at", "expires_at"),
    )


class RateBucket(Base):
    """One token bucket per caller of the tools, and per user name tried at a password sign-in
    (app.services.auth.ratelimit, app.services.auth.passwords), shared by every worker and replica:
    `tokens` left at `stamp`, refilled by the elapsed time in the one statement that takes a call. UNLOGGED: soft
    state, no WAL and no commit flush per call; a crash of PostgreSQL empties it, i.e. every bucket is full again
    (migration 0020)."""

    __tablename__ = "rate_bucket"
    # the token id (user id, name for stdio); `password-user:<id>` / `password-name:<digest>` for sign-in attempts
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float, nullable=False)
    stamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    granted: Mapped[bool] = mapped_column(Boolean, nullable=False)  # whether the last take was let through
    __table_args__ = {"prefixes": ["UNLOGGED"]}  # noqa: RUF012 (SQLAlchemy reads it once)
