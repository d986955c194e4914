"""The placement engine and its review queue: memory_status propose and edge_review (operations.py)."""
