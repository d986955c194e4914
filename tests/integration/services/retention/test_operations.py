"""app/services/retention/operations.py protect and app/services/review/operations.py reject: both refuse what is
missing."""

from __future__ import annotations

import uuid

import pytest

from app.errors import AppError
from app.services.context import AppContext
from app.services.retention.operations import protect_thought
from app.services.review import operations as review_operations
from tests.support.helpers import ToolCaller
from tests.support.search import create


async def test_protect_and_reject_refuse_what_is_missing(writer: ToolCaller, app_context: AppContext) -> None:
    made = await create(writer, "Keep me")
    protected = await protect_thought(app_context, writer.principal, made["id"], True)
    assert protected.is_protected
    with pytest.raises(AppError, match="Invalid 'thought_id'"):  # the id as a door received it
        await protect_thought(app_context, writer.principal, "nope", True)
    with pytest.raises(AppError, match="not found"):
        await review_operations.reject(app_context, writer.principal, str(uuid.uuid4()))
    with pytest.raises(AppError, match="Invalid 'proposal_id'"):
        await review_operations.reject(app_context, writer.principal, "nope")
