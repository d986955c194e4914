"""Health checks (docs/mcp-tools.md, action=health): the findings of 23 checks, a score, and the safe autofixes.

Each check is a query selecting its finding rows (`Check.sql`). The report runs none of them for its counts: one
statement (REPORT) counts every check at once, from indexes where a check's own query would read the whole `thought`
heap (migration 0024's content facts: the thoughts by project and status, their lexemes for the BM25 drift,
duplicate content's hashes; the partial indexes of the row checks), and reads the edges the caller may see once for
all of them (under the visibility rule each read of `edge` looks up both ends of every edge). A check with findings
then runs its own query (`answer`, where `sql` would read every heap row again) for its first DETAIL_LIMIT rows, when
details are asked for; the degree checks' rows come from REPORT itself. The console's health page shows a stored
report instead (app.services.status.health_reports).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import CONTENT_FACTS_STALE
from app.db.visibility import SHADOWED, UNSCOPED, resolved
from app.errors import forbidden
from app.formats import iso

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
# health_score's scale follows the severities (docs/mcp-tools.md, action=health): each category with a critical
# finding costs CRITICAL_COST, each with a warning WARNING_COST, and info findings INFO_COST each but INFO_CAP in
# all, so info findings alone never take the score below 90 (untagged or island thoughts are routine, and counted
# per thought they read 0/100 on a store of a few hundred), a warning takes it to 85 at most, a critical to 60.
CRITICAL_COST = 40.0
WARNING_COST = 15.0
INFO_COST = 0.25
INFO_CAP = 10.0
DETAIL_LIMIT = 50
SHORT = 80

_LIVE = "status IN ('active', 'draft')"


# Projects whose BM25 statistics (migration 0009) disagree with their rows, by three sums a recount checks cheaply:
# thoughts, their lengths (distinct lexemes), and the lexemes' document frequencies (which add up to the lengths).
# The triggers keep them in step; drift means rows were written with the triggers off (e.g. a restore with
# `session_replication_role = replica`). The fix recounts those projects.
LEXICAL_DRIFT = (
    "SELECT p.id AS project_id, coalesce(r.thoughts, 0) AS thoughts, coalesce(c.thoughts, 0) AS counted_thoughts, "
    "coalesce(r.tokens, 0) AS tokens, coalesce(c.tokens, 0) AS counted_tokens "
    "FROM project p "
    "LEFT JOIN (SELECT project_id, count(*) AS thoughts, sum(length(tsv)) AS tokens FROM thought "
    "GROUP BY project_id) r ON r.project_id = p.id "
    "LEFT JOIN lexical_corpus c ON c.project_id = p.id "
    "LEFT JOIN (SELECT project_id, sum(thoughts) AS tokens FROM lexical_term GROUP BY project_id) t "
    "ON t.project_id = p.id "
    "WHERE coalesce(r.thoughts, 0) <> coalesce(c.thoughts, 0) OR coalesce(r.tokens, 0) <> coalesce(c.tokens, 0) "
    "OR coalesce(r.tokens, 0) <> coalesce(t.tokens, 0)"
)


def _duplicates(projects: str) -> str:
    """duplicate_content's rows without grouping every content, among the projects meeting `projects`.

    The candidates are (project, hash) pairs stored by two or more live thoughts (grouped in the order of
    ix_thought_project_content_facts, index-only) and the content hash of every live thought whose facts are missing
    or stale (from the heap: ix_thought_content_facts_stale). A group of equal contents is among them either way
    (all its stored hashes are right, or one of its rows is stale); a wrong stored hash can only add a candidate.
    Then the check's own groups over the candidates' rows (found by ix_thought_project_content_md5), by content: a
    hash collision can neither make nor hide a finding."""
    return (
        f"SELECT t.project_id, left(t.content, {SHORT}) AS content, count(*) AS copies FROM ("
        f"SELECT project_id, content_md5 AS hash FROM thought WHERE {_LIVE} AND content_md5 IS NOT NULL "
        f"AND {projects} GROUP BY project_id, content_md5 HAVING count(*) > 1 "
        f"UNION SELECT project_id, md5(content)::uuid FROM thought WHERE {_LIVE} AND {CONTENT_FACTS_STALE}"
        ") AS candidate "
        # OFFSET 0 keeps the lookups per candidate: joined, PostgreSQL hashed every live thought's md5 (~a third of
        # the groups guessed to be duplicates: 180 against 25 ms at 100 k).
        "CROSS JOIN LATERAL (SELECT project_id, content FROM thought WHERE project_id = candidate.project_id "
        f"AND md5(content) = replace(candidate.hash::text, '-', '') AND {_LIVE} OFFSET 0) AS t "
        "GROUP BY t.project_id, t.content HAVING count(*) > 1"
    )


_HASHES_REPEAT = "project_id IN (SELECT project_id FROM scanned WHERE hashed > hashes)"


# Each end of an edge once, with its edges (distinct: a self-loop, which the schema refuses, would count once, as the
# checks' join on `t.id IN (source_id, target_id)` counts it) and whether it is a cluster edge's source (`clusters`)
# or target (`clustered`). One read of `edge`: under the visibility rule each read of it looks up both ends in
# `thought`, and PostgreSQL repeats a subquery of the scan in each of its parallel workers.
LINKED = (
    "SELECT ends.id, count(DISTINCT e.id) AS edges, bool_or(ends.clusters) AS clusters, "
    "bool_or(ends.clustered) AS clustered FROM edge e CROSS JOIN LATERAL unnest(ARRAY[e.source_id, e.target_id], "
    "ARRAY[e.type = 'cluster', false], ARRAY[false, e.type = 'cluster']) AS ends(id, clusters, clustered) "
    "GROUP BY ends.id"
)


@dataclass(frozen=True)
class Check:
    category: str
    name: str
    severity: str
    sql: str  # selects the finding rows (every column becomes a detail key)
    # The same rows as `sql` as the report reads them, where `sql` would read every thought's heap; None: `sql`.
    answer: str | None = None
    # How REPORT counts the findings, an expression over its CTEs (`ends`, `scanned`), where `sql` would read every
    # thought or edge again; None: REPORT counts the rows of `answer`.
    counted: str | None = None
    # A degree check: its findings are the rows of `ends` (a thought at an end of a readable edge, its edges) that
    # meet this condition, (thought_id, edges) as `sql` selects them; REPORT counts them and carries the first rows.
    ends: str | None = None


CHECKS: tuple[Check, ...] = (
    Check(
        "structural_integrity",
        "orphan_edges",
        "critical",
        "SELECT e.id AS edge_id FROM edge e LEFT JOIN thought s ON s.id = e.source_id "
        "LEFT JOIN thought t ON t.id = e.target_id WHERE s.id IS NULL OR t.id IS NULL",
        # Every end of an edge is in LINKED; those with a thought are in `ends`.
        counted="(SELECT count(*) FROM edge e WHERE NOT EXISTS (SELECT 1 FROM ends WHERE ends.id = e.source_id) "
        "OR NOT EXISTS (SELECT 1 FROM ends WHERE ends.id = e.target_id))",
    ),
    Check(
        "structural_integrity",
        "self_loop_edges",
        "critical",
        "SELECT id AS edge_id FROM edge WHERE source_id = target_id",
    ),
    Check(
        "structural_integrity",
        "duplicate_edges",
        "critical",
        "SELECT least(source_id, target_id) AS thought_a, greatest(source_id, target_id) AS thought_b, "
        "count(*) AS edges FROM edge GROUP BY 1, 2 HAVING count(*) > 1",
    ),
    Check(
        "structural_integrity",
        "cluster_constraint_violations",
        "critical",
        "SELECT e.id AS edge_id, e.source_id FROM edge e JOIN thought s ON s.id = e.source_id "
        "WHERE e.type = 'cluster' AND NOT s.is_cluster",
    ),
    Check(
        "cluster_health",
        "empty_clusters",
        "warning",
        f"SELECT c.id AS cluster_id, left(c.content, {SHORT}) AS content FROM thought c WHERE c.is_cluster "
        "AND c.status <> 'archived' AND NOT EXISTS "
        "(SELECT 1 FROM edge e WHERE e.source_id = c.id AND e.type = 'cluster')",
        counted="(SELECT coalesce(sum(clusters), 0) FROM scanned) "
        "- (SELECT count(*) FROM ends WHERE is_cluster AND status <> 'archived' AND clusters)",
    ),
    Check(
        "cluster_health",
        "singleton_clusters",
        "warning",
        f"SELECT c.id AS cluster_id, left(c.content, {SHORT}) AS content FROM thought c JOIN edge e "
        "ON e.source_id = c.id AND e.type = 'cluster' WHERE c.is_cluster AND c.status <> 'archived' "
        "GROUP BY c.id, c.content HAVING count(*) = 1",  # c.content named: the tables may be CTEs (no key)
    ),
    Check(
        "cluster_health",
        "orphaned_cluster_members",
        "warning",
        "SELECT m.id AS thought_id, c.id AS cluster_id FROM edge e JOIN thought c ON c.id = e.source_id "
        f"JOIN thought m ON m.id = e.target_id WHERE e.type = 'cluster' AND c.status = 'archived' AND m.{_LIVE}",
    ),
    Check(
        "cluster_health",
        "clusterless_dense_thoughts",
        "warning",
        "SELECT t.id AS thought_id, count(*) AS edges FROM thought t JOIN edge e ON t.id IN (e.source_id, e.target_id) "
        f"WHERE t.{_LIVE} AND NOT t.is_cluster AND NOT EXISTS (SELECT 1 FROM edge c WHERE c.target_id = t.id "
        "AND c.type = 'cluster') GROUP BY t.id HAVING count(*) >= 5",
        ends=f"{_LIVE} AND NOT is_cluster AND clustered IS NOT TRUE AND edges >= 5",
    ),
    Check(
        "connectivity",
        "island_thoughts",
        "info",
        f"SELECT t.id AS thought_id FROM thought t WHERE t.{_LIVE} AND NOT EXISTS "
        "(SELECT 1 FROM edge e WHERE e.source_id = t.id OR e.target_id = t.id)",
        counted=f"(SELECT coalesce(sum(draft + active), 0) FROM scanned) - (SELECT count(*) FROM ends WHERE {_LIVE})",
    ),
    Check(
        "connectivity",
        "overlinked_thoughts",
        "warning",
        "SELECT t.id AS thought_id, count(*) AS edges FROM thought t JOIN edge e ON t.id IN (e.source_id, e.target_id) "
        f"WHERE t.{_LIVE} AND NOT t.is_cluster GROUP BY t.id HAVING count(*) > 10",
        ends=f"{_LIVE} AND NOT is_cluster AND edges > 10",
    ),
    Check(
        "content_quality",
        "duplicate_content",
        "info",
        f"SELECT project_id, left(content, {SHORT}) AS content, count(*) AS copies FROM thought WHERE {_LIVE} "
        "GROUP BY project_id, content HAVING count(*) > 1",
        answer=_duplicates("true"),
        # Only the projects where two live thoughts store one hash (REPORT's `scanned` counts their distinct hashes
        # in its pass): most stores have none, and the pass over every hash is skipped (~10 ms at 100 k).
        counted=f"(SELECT count(*) FROM ({_duplicates(_HASHES_REPEAT)}) AS finding)",
    ),
    Check(
        "content_quality",
        "too_short_content",
        "info",
        f"SELECT id AS thought_id, content FROM thought WHERE {_LIVE} AND length(btrim(content)) < 10",
    ),
    Check(
        "content_quality",
        "stale_drafts",
        "info",
        "SELECT id AS thought_id, created_at FROM thought WHERE status = 'draft' "
        "AND created_at < now() - interval '30 days' AND (surface_after IS NULL OR surface_after <= now())",
    ),
    Check(
        "content_quality",
        "untagged_thoughts",
        "info",
        f"SELECT id AS thought_id FROM thought WHERE {_LIVE} AND cardinality(tags) = 0",
    ),
    Check(
        "semantic_consistency",
        "circular_chains",
        "warning",
        "WITH RECURSIVE walk(start_id, node, path, cycle) AS ("
        " SELECT e.source_id, e.target_id, ARRAY[e.source_id, e.target_id], false FROM edge e"
        " WHERE e.type IN ('parent', 'develops')"
        " UNION ALL SELECT w.start_id, e.target_id, w.path || e.target_id, e.target_id = ANY(w.path)"
        " FROM walk w JOIN edge e ON e.source_id = w.node AND e.type IN ('parent', 'develops')"
        " WHERE NOT w.cycle AND cardinality(w.path) < 50)"
        " SELECT DISTINCT start_id AS thought_id FROM walk WHERE cycle AND node = start_id",
    ),
    Check(
        "semantic_consistency",
        "broken_parent_chains",
        "warning",
        "SELECT e.id AS edge_id, e.source_id AS parent_id, e.target_id AS child_id FROM edge e "
        "JOIN thought p ON p.id = e.source_id JOIN thought c ON c.id = e.target_id "
        "WHERE e.type = 'parent' AND p.status = 'archived' AND c.status = 'active'",
    ),
    Check(
        "semantic_consistency",
        "replaces_chains",
        "warning",
        "SELECT a.source_id AS newest_id, a.target_id AS middle_id, b.target_id AS oldest_id FROM edge a "
        "JOIN edge b ON b.source_id = a.target_id AND b.type = 'replaces' WHERE a.type = 'replaces'",
    ),
    Check(
        "semantic_consistency",
        "contradiction_in_cluster",
        "warning",
        "SELECT ca.source_id AS cluster_id, x.source_id AS member_a, x.target_id AS member_b, "
        "x.id AS contradicts_edge_id FROM edge x "
        "JOIN edge ca ON ca.target_id = x.source_id AND ca.type = 'cluster' "
        "JOIN edge cb ON cb.target_id = x.target_id AND cb.type = 'cluster' AND cb.source_id = ca.source_id "
        "JOIN thought a ON a.id = x.source_id JOIN thought b ON b.id = x.target_id "
        "WHERE x.type = 'contradicts' AND a.status <> 'archived' AND b.status <> 'archived'",
    ),
    Check(
        "semantic_consistency",
        "supports_self_conflict",
        "critical",
        "SELECT s1.source_id AS thought_a, s1.target_id AS thought_b, s2.target_id AS thought_c FROM edge s1 "
        "JOIN edge s2 ON s2.source_id = s1.target_id AND s2.type = 'supports' "
        "JOIN edge x ON x.type = 'contradicts' AND ((x.source_id = s2.target_id AND x.target_id = s1.source_id) "
        "OR (x.target_id = s2.target_id AND x.source_id = s1.source_id)) WHERE s1.type = 'supports'",
    ),
    Check(
        "data_drift",
        "missing_embeddings",
        "info",
        f"SELECT id AS thought_id FROM thought WHERE {_LIVE} AND embedding IS NULL",
    ),
    Check(
        "data_drift",
        "lexical_statistics_drift",
        "warning",
        LEXICAL_DRIFT,
    ),
    Check(
        "data_drift",
        "dead_primers",
        "info",
        "SELECT p.id AS primer_id, p.thought_id FROM primer p JOIN thought t ON t.id = p.thought_id "
        "WHERE t.status = 'archived'",
    ),
    Check(
        "data_drift",
        "importance_outliers",
        "info",
        f"SELECT id AS thought_id, importance FROM thought WHERE {_LIVE} AND importance < 0.05",
    ),
)
LEXICAL_CHECK = "lexical_statistics_drift"  # answered from REPORT's rows and lexemes per project, not by its `sql`
STATUSES = ("draft", "active", "archived")

# Each end of a readable edge (LINKED) with its thought's status and flags: what the degree checks, the islands and
# the empty clusters ask of the edges. A thought by id is an index-only lookup (ix_thought_id_facts).
ENDS = (
    "SELECT linked.id, linked.edges, linked.clusters, linked.clustered, t.status, t.is_cluster "
    "FROM linked JOIN thought t ON t.id = linked.id"
)

# The whole report in one statement, one snapshot (as LEXICAL_DRIFT is one). Its own `edge` (a CTE of the readable
# edges, materialized: under the visibility rule each read of `edge` looks up both ends of every edge) is read once
# and shadows the table (or the rule's CTE) for LINKED and every check. Per project (`projects`): its thoughts by
# status, its lexemes and its BM25 statistics — a project without thoughts has no `scanned` row, a thought whose
# project row is gone (written with the foreign keys off) no `project` one. `scanned` reads the content facts
# (migration 0024) from ix_thought_project_content_facts, index-only; `restated` adds what length(tsv) says beyond
# them for the rows whose facts are missing or stale (ix_thought_content_facts_stale: none, once backfilled, unless
# written around the repository). Beside them (`findings`, one row) every other check's count, and the first rows
# of the degree checks.
_DEGREE = [check for check in CHECKS if check.ends]


def _counted(check: Check) -> str:
    if check.counted:
        return check.counted
    if check.ends:
        return f"(SELECT count(*) FROM ends WHERE {check.ends})"
    return f"(SELECT count(*) FROM ({check.answer or check.sql}) AS finding)"


def _first(check: Check, column: str) -> str:
    return (
        f"(SELECT array_agg({column} ORDER BY id) FROM (SELECT id, edges FROM ends WHERE {check.ends} "
        f"ORDER BY id LIMIT {DETAIL_LIMIT}) AS first) AS {check.name}_{column}"
    )


REPORT = (
    f"SELECT * FROM (WITH edge AS MATERIALIZED (SELECT * FROM edge), linked AS ({LINKED}), ends AS ({ENDS}), "
    "scanned AS (SELECT project_id, count(*) AS thoughts, coalesce(sum(lexemes), 0) AS tokens, "
    + ", ".join(f"count(*) FILTER (WHERE status = '{status}') AS {status}" for status in STATUSES)
    + ", count(*) FILTER (WHERE is_cluster AND status <> 'archived') AS clusters, "
    # On the index's order (PostgreSQL 16+ counts the distinct values of presorted input without sorting).
    f"count(content_md5) FILTER (WHERE {_LIVE}) AS hashed, count(DISTINCT content_md5) FILTER (WHERE {_LIVE}) "
    "AS hashes FROM thought GROUP BY project_id), "
    f"restated AS (SELECT project_id, sum(length(tsv) - coalesce(lexemes, 0)) AS tokens FROM thought "
    f"WHERE {CONTENT_FACTS_STALE} GROUP BY project_id), "
    "terms AS (SELECT project_id, sum(thoughts) AS tokens FROM lexical_term GROUP BY project_id), "
    "projects AS (SELECT coalesce(s.project_id, p.id) AS project_id, p.id IS NOT NULL AS has_project, "
    "coalesce(s.thoughts, 0) AS thoughts, coalesce(s.tokens, 0) + coalesce(r.tokens, 0) AS tokens, "
    + ", ".join(f"coalesce(s.{status}, 0) AS {status}" for status in STATUSES)
    + ", coalesce(c.thoughts, 0) AS counted_thoughts, coalesce(c.tokens, 0) AS counted_tokens, "
    "coalesce(terms.tokens, 0) AS term_tokens "
    "FROM scanned s FULL JOIN project p ON p.id = s.project_id LEFT JOIN restated r ON r.project_id = s.project_id "
    "LEFT JOIN lexical_corpus c ON c.project_id = p.id LEFT JOIN terms ON terms.project_id = p.id), "
    "findings AS (SELECT "
    + ", ".join(
        [f"{_counted(check)} AS {check.name}" for check in CHECKS if check.name != LEXICAL_CHECK]
        + [_first(check, column) for check in _DEGREE for column in ("id", "edges")]
    )
    + ") SELECT * FROM findings LEFT JOIN projects ON true) AS report"  # a row even without projects
)


@dataclass
class Scan:
    """What REPORT answered: each check's findings (the first rows of the degree checks), thoughts by status, the
    projects whose statistics drifted."""

    counts: dict[str, int]
    first: dict[str, list[dict[str, Any]]]
    by_status: dict[str, int]
    drifted: list[dict[str, Any]]


def _scan(rows: Sequence[Any]) -> Scan:
    findings = rows[0]._mapping  # the same on every row
    counts = {check.name: int(findings[check.name]) for check in CHECKS if check.name != LEXICAL_CHECK}
    first = {
        check.name: [
            {"thought_id": str(thought_id), "edges": int(edges)}
            for thought_id, edges in zip(
                findings[f"{check.name}_id"] or [], findings[f"{check.name}_edges"] or [], strict=True
            )
        ]
        for check in _DEGREE
    }
    by_status = dict.fromkeys(STATUSES, 0)
    drifted = []
    for row in rows:
        if row.project_id is None:  # no project and no thought
            continue
        for status in STATUSES:
            by_status[status] += int(getattr(row, status))
        thoughts, tokens = int(row.thoughts), int(row.tokens)
        if row.has_project and (
            thoughts != row.counted_thoughts or tokens != row.counted_tokens or tokens != row.term_tokens
        ):
            drifted.append(
                {
                    "project_id": str(row.project_id),
                    "thoughts": thoughts,
                    "counted_thoughts": int(row.counted_thoughts),
                    "tokens": tokens,
                    "counted_tokens": int(row.counted_tokens),
                }
            )
    counts[LEXICAL_CHECK] = len(drifted)
    return Scan(counts, first, by_status, sorted(drifted, key=lambda row: str(row["project_id"])))


AUTOFIX_NEEDS_EVERY_PROJECT = (
    "Forbidden: the safe autofixes change every project; user '{name}' is not a member of them all"
)


def _visible(sql: str) -> TextClause:
    """A check's SQL over what the caller may read (app.db.visibility: CTEs shadow the tables)."""
    return text(sql).execution_options(**SHADOWED)


def _everywhere(sql: str) -> TextClause:
    """A fix's SQL over every project's rows (only for a caller who sees them all, or none restricted)."""
    return text(sql).execution_options(**UNSCOPED)


def _value(value: Any) -> Any:
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, datetime):
        return iso(value)  # the wire's one time format
    return str(value)


def _detail(row: Any) -> dict[str, Any]:
    return {key: _value(value) for key, value in row._mapping.items()}


def health_score(critical_categories: int, warning_categories: int, info_findings: int) -> float:
    """clamp(100 − 40 × categories with a critical finding − 15 × categories with a warning finding
    − min(10, 0.25 × info findings), 0, 100), rounded to 2 places."""
    info = min(INFO_CAP, INFO_COST * info_findings)
    score = 100 - CRITICAL_COST * critical_categories - WARNING_COST * warning_categories - info
    return round(min(100.0, max(0.0, score)), 2)


class HealthService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def report(self, include_details: bool, severity: str | None = None) -> dict[str, Any]:
        floor = SEVERITY_RANK[severity] if severity else 0
        scan = _scan((await self.session.execute(_visible(REPORT))).all())
        categories: dict[str, dict[str, Any]] = {}
        findings = {"critical": 0, "warning": 0, "info": 0}
        critical_categories: set[str] = set()
        warning_categories: set[str] = set()
        for check in CHECKS:
            shown = SEVERITY_RANK[check.severity] >= floor
            count = scan.counts[check.name]
            findings[check.severity] += count
            if count and check.severity == "critical":
                critical_categories.add(check.category)
            if count and check.severity == "warning":
                warning_categories.add(check.category)
            if not shown:
                continue
            entry: dict[str, Any] = {"severity": check.severity, "count": count}
            if include_details:
                entry["details"] = await self._details(check, scan, count)
            categories.setdefault(check.category, {})[check.name] = entry
        return {
            "health_score": health_score(len(critical_categories), len(warning_categories), findings["info"]),
            "summary": {"thoughts": scan.by_status, "findings": findings},
            "categories": categories,
        }

    async def _details(self, check: Check, scan: Scan, count: int) -> list[dict[str, Any]]:
        """The check's first DETAIL_LIMIT finding rows: REPORT's, or its own statement's when it has findings."""
        if check.name == LEXICAL_CHECK:
            return scan.drifted[:DETAIL_LIMIT]
        if check.ends:
            return scan.first[check.name]
        if not count:
            return []
        # Fewer findings than the limit: all of them, planned as such (under a LIMIT PostgreSQL picks a fast-start
        # plan, which walked every thought for clusterless_dense_thoughts' 2 rows at 100 k: 40 against 30 ms CPU).
        limit = f" LIMIT {DETAIL_LIMIT}" if count >= DETAIL_LIMIT else ""
        statement = _visible(f"SELECT * FROM ({check.answer or check.sql}) AS finding{limit}")
        rows = (await self.session.execute(statement)).all()
        # Its own statement, after REPORT: rows committed in between may take it past the limit.
        return [_detail(row) for row in rows[:DETAIL_LIMIT]]

    async def autofix(self) -> dict[str, int]:
        """Safe fixes only: orphan and self-loop edges go, empty unprotected clusters are archived, drifted BM25
        statistics are recounted from the rows. They judge every project's rows, so a caller who cannot see
        every project is refused (nothing is written)."""
        visibility = await resolved(self.session)
        if visibility is not None and not visibility.sees_all:
            raise forbidden(AUTOFIX_NEEDS_EVERY_PROJECT.format(name=visibility.caller.principal.name))
        # Every project's rows, as the check above allows: the statements are UNSCOPED.
        orphans = await self.session.execute(
            _everywhere(
                "DELETE FROM edge e WHERE NOT EXISTS (SELECT 1 FROM thought s WHERE s.id = e.source_id) "
                "OR NOT EXISTS (SELECT 1 FROM thought t WHERE t.id = e.target_id)"
            )
        )
        loops = await self.session.execute(_everywhere("DELETE FROM edge WHERE source_id = target_id"))
        empty = await self.session.execute(
            _everywhere(
                "UPDATE thought c SET status = 'archived', archived_at = now(), updated_at = now() "
                "WHERE c.is_cluster AND c.status <> 'archived' AND NOT c.is_protected AND NOT EXISTS "
                "(SELECT 1 FROM edge e WHERE e.source_id = c.id AND e.type = 'cluster')"
            )
        )
        drifted = await self.session.execute(
            _everywhere(f"SELECT lexical_rebuild(project_id) FROM ({LEXICAL_DRIFT}) AS drift ORDER BY project_id")
        )
        return {
            "lexical_statistics_rebuilt": len(drifted.all()),
            "orphan_edges_deleted": int(orphans.rowcount or 0),  # type: ignore[attr-defined]
            "self_loop_edges_deleted": int(loops.rowcount or 0),  # type: ignore[attr-defined]
            "empty_clusters_archived": int(empty.rowcount or 0),  # type: ignore[attr-defined]
        }
