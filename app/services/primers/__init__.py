"""memory_primers: the always-at-hand set (operations.py; delete runs in its confirm flow)."""
