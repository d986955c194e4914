"""Expected shapes from the tool contract, written out once for every test (never read from app code)."""

from __future__ import annotations

# The compact shaped thought (the default).
COMPACT_THOUGHT_KEYS = frozenset({"id", "content", "status", "tags", "project"})

# The full shaped thought (compact=false).
FULL_THOUGHT_KEYS = frozenset(
    {
        "id",
        "content",
        "status",
        "tags",
        "project",
        "project_id",
        "importance",
        "is_protected",
        "is_global",
        "is_cluster",
        "surface_after",
        "archived_at",
        "created_by",
        "created_at",
        "updated_at",
    }
)

# The contract's tool map: the 11 tools → their actions, in the contract's order.
CONTRACT_ACTIONS: dict[str, list[str]] = {
    "memory_recall": ["search", "get", "context", "chain", "clusters", "list"],
    "memory_store": ["create", "update", "link", "link_batch", "unlink", "unlink_batch", "retype", "bulk_create"],
    "memory_supersede": ["archive", "archive_batch", "merge"],
    "memory_status": ["slots", "frontier", "config", "health", "propose"],
    "memory_manage": ["list", "create", "update", "delete", "resolve"],
    "edge_review": ["enqueue", "list", "apply", "apply_batch", "rollback", "reject"],
    "retention_review": ["list", "protect", "delete", "compact"],
    "memory_crystallize": ["graph", "cluster", "auto_cluster"],
    "memory_reflect": ["reflect", "timeline"],
    "memory_primers": ["list", "delete"],
    "memory_guide": [],  # no action argument
}
