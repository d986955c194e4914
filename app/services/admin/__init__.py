"""Users, projects, membership, export/import: memory_manage's calls (operations.py), the CLI's and console's admin."""
