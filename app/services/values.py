"""The value types the doors (app.mcp, app.http, app.cli) name, re-exported so that no door imports app.db.

They are the schema's enums, the records a service returns and the `Database` handle a door passes on to an
operation (typed, never opened there); the doors read them, never the repositories that produce them (the import
contract "Doors reach the database through the services", pyproject.toml).
"""

from __future__ import annotations

from app.db.engine import Database
from app.db.models import EdgeType, Role
from app.db.records import EdgeRecord, Principal, ProjectRecord, ThoughtRecord, UrlLinkRecord
from app.db.repositories.health_reports import HealthReportRow
from app.db.repositories.job_runs import JobRunRow
from app.db.repositories.members import MemberRow
from app.db.repositories.oauth import GrantRow
from app.db.repositories.users import TokenRow, UserRow
from app.db.visibility import ROLE_RANK

__all__ = [
    "ROLE_RANK",
    "Database",
    "EdgeRecord",
    "EdgeType",
    "GrantRow",
    "HealthReportRow",
    "JobRunRow",
    "MemberRow",
    "Principal",
    "ProjectRecord",
    "Role",
    "ThoughtRecord",
    "TokenRow",
    "UrlLinkRecord",
    "UserRow",
]
