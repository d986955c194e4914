"""Helpers shared by test packages (a test module imports another's helpers only from here)."""
