"""memory_reflect's reflection as a unit of work."""

from __future__ import annotations

from app.db.records import Principal, ProjectRecord
from app.db.repositories.projects import ProjectRepository
from app.services.context import AppContext
from app.services.reflect.service import ReflectCounts, ReflectInput, ReflectionService
from app.services.scope import normalize_path


async def record_reflection(
    app: AppContext, principal: Principal, data: ReflectInput, cwd: str | None
) -> tuple[ReflectCounts, ProjectRecord | None]:
    """One reflection as a unit of work: decisions and pending embedded before the transaction, slots
    scoped to the cwd's project (global without one), thoughts written there or to the default project.
    Answers the counts and the cwd's project, if it names one."""
    texts = [*data.decisions, *data.pending]
    vectors = await app.embedding.embed_passages(texts) if texts else None
    profile = app.embedding.profile
    by_text = dict(zip(texts, vectors, strict=True)) if vectors and profile else {}
    async with app.db.unit_of_work() as session:
        projects = ProjectRepository(session)
        path = normalize_path(cwd or "")
        resolved = await projects.find_for_path(path) if path else None
        project = resolved or await projects.ensure_default()
        counts = await ReflectionService(session, principal, app.settings.slots.default_max_chars).reflect(
            data,
            resolved.id if resolved else None,
            project,
            by_text,
            profile.model_id if by_text and profile else None,
        )
    return counts, resolved
