"""memory_status's reads (operations.py): slots, frontier, health checks and the stored health report."""
