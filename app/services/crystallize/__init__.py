"""memory_crystallize: the project graph, explicit clusters and auto_cluster (operations.py)."""
