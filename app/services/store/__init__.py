"""memory_store's writes (operations.py): thoughts (create, update, bulk_create) and edges (link, unlink, retype)."""
