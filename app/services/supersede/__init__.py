"""memory_supersede's archive and merge; they run in their confirm flows (app.mcp.confirm): no operations.py."""
