"""The security regression suite (docs/SECURITY.md), grouped by rule: paths, per-row writes, inputs, sessions.

Each module reproduces red-team findings as the user of the finding, over the tool boundary, with the team of
`tests/support/team.py`; the access matrix over HTTP (`tests/e2e/test_access_matrix.py`) stands beside it.
"""
