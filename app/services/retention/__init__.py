"""memory_retention: the candidate rule, protect, hard delete and compaction (operations.py)."""
