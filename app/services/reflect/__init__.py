"""memory_reflect's reflection: summary, goals, decisions and pending drafts (operations.py)."""
